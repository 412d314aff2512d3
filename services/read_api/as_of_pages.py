"""The read-model lookups an as-of page needs: a slug's claim, and related claims resolved as they stood then."""

from __future__ import annotations

from sqlalchemy import Connection, select

from projections.page_model import PAGE
from projections.tables import claim_pages
from services.read_api.queries import shaped_page_json
from services.timeline.as_of import AsOf


def claim_of_slug(conn: Connection, slug: str) -> str | None:
    """The id of the claim that owns this slug: the first drafted with it (slugs never change after the draft;
    a later claim drafted with a taken slug by a direct producer is found by its id only)."""
    query = select(claim_pages.c.claim_id).where(claim_pages.c.slug == slug).order_by(claim_pages.c.first_seq).limit(1)
    return conn.execute(query).scalar()


def shaped_page(conn: Connection, doc: str, as_of: AsOf) -> bytes:
    """The page shaped as the live one (``queries.shaped_page_json``), related claims known by statement
    resolved only to claims that had been drafted by ``as_of``."""
    return shaped_page_json(conn, doc, resolve_by_statement=lambda unresolved: _resolve_as_of(conn, unresolved, as_of))


def _resolve_as_of(conn: Connection, unresolved: dict[str, dict], as_of: AsOf) -> None:
    query = select(claim_pages.c.statement_key, claim_pages.c.claim_id, claim_pages.c.first_seq, claim_pages.c.doc).where(
        claim_pages.c.statement_key.in_(list(unresolved))
    )
    for statement_key, claim_id, first_seq, other in conn.execute(query):
        if _drafted_by(as_of, first_seq, other):
            unresolved[statement_key]["claim_id"] = claim_id


def _drafted_by(as_of: AsOf, first_seq: int, doc: str) -> bool:
    if as_of.seq is not None:
        return first_seq <= as_of.seq
    if as_of.at is None:
        return True
    return PAGE.validate_json(doc).notes.drafted.at <= as_of.at
