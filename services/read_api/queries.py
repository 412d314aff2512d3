"""The read API's SQL: one indexed read per claim page, keyset pages for listings."""

from __future__ import annotations

import json

from sqlalchemy import Connection, or_, select

from projections.page_model import PAGE, ClaimPage
from projections.tables import checkpoints, claim_pages, unreadable_events

SUMMARY_COLUMNS = (
    claim_pages.c.claim_id,
    claim_pages.c.slug,
    claim_pages.c.statement,
    claim_pages.c.capability,
    claim_pages.c.lifecycle,
    claim_pages.c.review_state,
    claim_pages.c.revision,
    claim_pages.c.counts_toward_scorecard,
    claim_pages.c.sources_active,
    claim_pages.c.sources_withdrawn,
    claim_pages.c.disagreements_open,
    claim_pages.c.last_seq,
)


def claim_page_json(conn: Connection, key: str) -> tuple[bytes, int] | None:
    """A claim's page (JSON) by id or slug and its version (last sequence), related claims resolved.

    One indexed read of the stored document, plus one for related claims known only by statement;
    the document is passed through as JSON, never re-validated on the way out.
    """
    row = conn.execute(
        select(claim_pages.c.doc, claim_pages.c.last_seq)
        .where(or_(claim_pages.c.claim_id == key, claim_pages.c.slug == key))
        .limit(1)
    ).first()
    if row is None:
        return None
    doc, version = row
    page = json.loads(doc)
    unresolved = {r["key"]: r for r in page["related"] if r["claim_id"] is None}
    if not unresolved:
        return doc.encode(), version
    query = select(claim_pages.c.statement_key, claim_pages.c.claim_id).where(
        claim_pages.c.statement_key.in_(list(unresolved))
    )
    for statement_key, claim_id in conn.execute(query):
        unresolved[statement_key]["claim_id"] = claim_id
    return json.dumps(page, ensure_ascii=False, separators=(",", ":")).encode(), version


def claim_page(conn: Connection, key: str) -> ClaimPage | None:
    """A claim's page as objects (for tools and tests), related claims resolved."""
    found = claim_page_json(conn, key)
    return None if found is None else PAGE.validate_json(found[0])


def claim_summaries(conn: Connection, *, after: str | None, limit: int, capability: str | None) -> list[dict]:
    """Up to ``limit`` claim summaries in claim-id order, after the claim id ``after``."""
    query = select(*SUMMARY_COLUMNS).order_by(claim_pages.c.claim_id).limit(limit)
    if after is not None:
        query = query.where(claim_pages.c.claim_id > after)
    if capability is not None:
        query = query.where(claim_pages.c.capability == capability)
    return [dict(row._mapping) for row in conn.execute(query)]


def positions(conn: Connection) -> dict[str, int]:
    """Each projection's last applied log sequence."""
    return dict(conn.execute(select(checkpoints.c.name, checkpoints.c.last_seq)).all())


def unreadable(conn: Connection, *, after: int, limit: int) -> list[dict]:
    """Events the projections could not read, in log order after sequence ``after``."""
    query = (
        select(unreadable_events.c.seq, unreadable_events.c.subject, unreadable_events.c.reason)
        .where(unreadable_events.c.seq > after)
        .order_by(unreadable_events.c.seq)
        .limit(limit)
    )
    return [dict(row._mapping) for row in conn.execute(query)]
