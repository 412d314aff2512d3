"""The read-model lookups an as-of page needs: a slug's claim, and related claims resolved as they stood then."""

from __future__ import annotations

import json

from sqlalchemy import Connection, select

from projections.page_model import PAGE
from projections.tables import claim_pages
from services.read_api.queries import RELATED_SHOWN, resolve_related
from services.timeline.as_of import AsOf


def claim_of_slug(conn: Connection, slug: str) -> str | None:
    """The id of the claim with this slug (slugs never change after the draft)."""
    return conn.execute(select(claim_pages.c.claim_id).where(claim_pages.c.slug == slug).limit(1)).scalar()


def shaped_page(conn: Connection, doc: str, as_of: AsOf) -> bytes:
    """The page as ``queries.claim_page_json`` shapes the live one (its five first related claims, those known
    only by statement resolved to pages), resolving only to claims that had been drafted by ``as_of``; each
    related claim's review state is its state now, as on the live page."""
    if not needs_shaping(doc):
        return doc.encode()
    page = json.loads(doc)
    page["related"] = page["related"][:RELATED_SHOWN]
    unresolved = {r["key"]: r for r in page["related"] if r["claim_id"] is None}
    if unresolved:
        _resolve_as_of(conn, unresolved, as_of)
    resolve_related(conn, page["related"], resolve=False)  # review states now, as the live page shows them
    return json.dumps(page, ensure_ascii=False, separators=(",", ":")).encode()


def _resolve_as_of(conn: Connection, unresolved: dict[str, dict], as_of: AsOf) -> None:
    query = select(claim_pages.c.statement_key, claim_pages.c.claim_id, claim_pages.c.first_seq, claim_pages.c.doc).where(
        claim_pages.c.statement_key.in_(list(unresolved))
    )
    for statement_key, claim_id, first_seq, other in conn.execute(query):
        if _drafted_by(as_of, first_seq, other):
            unresolved[statement_key]["claim_id"] = claim_id


def needs_shaping(doc: str) -> bool:
    """Whether the page has related claims to cut or resolve; one with none is served as it is, unparsed.
    (Inside a JSON string the quotes would be escaped, so text cannot look like the empty list.)"""
    return '"related":[]' not in doc


def _drafted_by(as_of: AsOf, first_seq: int, doc: str) -> bool:
    if as_of.seq is not None:
        return first_seq <= as_of.seq
    if as_of.at is None:
        return True
    return PAGE.validate_json(doc).notes.drafted.at <= as_of.at
