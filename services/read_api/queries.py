"""The read API's SQL: one indexed read per claim page, counts, positions and scorecard rows (listings: listing_sql.py)."""

from __future__ import annotations

import json
from collections.abc import Callable

from sqlalchemy import (
    Connection,
    bindparam,
    func,
    or_,
    select,
)

from projections.page_model import PAGE, ClaimPage
from projections.tables import (
    RELATION_COLUMNS,
    checkpoints,
    claim_pages,
    unreadable_events,
)

RELATED_SHOWN = 5  # a page lists its five highest-ranked related claims, as the registry does


# Built once: building the statement per request (its cache key included) cost more than running it.
PAGE_BY_KEY = (
    select(claim_pages.c.doc, claim_pages.c.last_seq)
    .where(or_(claim_pages.c.claim_id == bindparam("key"), claim_pages.c.slug == bindparam("key")))
    .order_by(claim_pages.c.first_seq)  # a slug is the first claim's that took it (docs/commands.md)
    .limit(1)
)
# How a stored page (compact JSON, written by PAGE.dump_json) says it has no related claims. Only the
# page's own key can match: in a string value the quotes around "related" would be escaped.
NO_RELATED = '"related":[]'


def claim_page_json(conn: Connection, key: str) -> tuple[bytes, int] | None:
    """A claim's page (JSON) by id or slug and its version (last sequence), related claims resolved.

    One indexed read of the stored document, plus one for related claims known only by statement;
    the document is passed through as JSON, never re-validated on the way out.
    """
    row = conn.execute(PAGE_BY_KEY, {"key": key}).first()
    if row is None:
        return None
    doc, version = row
    return shaped_page_json(conn, doc), version


def claim_page_doc(conn: Connection, key: str) -> dict | None:
    """A claim's stored page (by id or slug) as it is stored, parsed: for reads of one part of it."""
    row = conn.execute(PAGE_BY_KEY, {"key": key}).first()
    return None if row is None else json.loads(row.doc)


def shaped_page_json(
    conn: Connection, doc: str, *, resolve_by_statement: Callable[[dict[str, dict]], None] | None = None
) -> bytes:
    """A stored page as served: its first related claims (ranked), each with its review state now, those
    known only by statement resolved to pages (by ``resolve_by_statement``, given them by statement key:
    by default, to any page there is now). A page with no related claims is passed through unparsed."""
    if NO_RELATED in doc:
        return doc.encode()
    page = json.loads(doc)
    page["related"] = page["related"][:RELATED_SHOWN]
    resolve_related(conn, page["related"], resolve_by_statement=resolve_by_statement)
    return json.dumps(page, ensure_ascii=False, separators=(",", ":")).encode()


def resolve_related(
    conn: Connection, related: list[dict], *, resolve_by_statement: Callable[[dict[str, dict]], None] | None = None
) -> None:
    """Related claims known by statement resolved to their pages (by ``resolve_by_statement`` when given,
    otherwise in the same read as the review states), and each one in the registry given its review state
    now, flagged when the stored label says otherwise. One indexed read."""
    unresolved = {r["key"]: r for r in related if r["claim_id"] is None}
    if resolve_by_statement is not None:
        if unresolved:
            resolve_by_statement(unresolved)
        unresolved = {}
    by_id = {r["claim_id"]: r for r in related if r["claim_id"] is not None}
    query = select(claim_pages.c.statement_key, claim_pages.c.claim_id, claim_pages.c.review_state).where(
        or_(claim_pages.c.statement_key.in_(list(unresolved)), claim_pages.c.claim_id.in_(list(by_id)))
    )
    for statement_key, claim_id, review_state in conn.execute(query):
        entry = by_id.get(claim_id) or unresolved.get(statement_key)
        if entry is None or entry.get("review_state_now") is not None:
            continue
        entry["claim_id"] = claim_id
        entry["review_state_now"] = review_state
        label = entry["review_label"]
        entry["label_disagrees"] = label is not None and label.strip().casefold() != review_state.casefold()


def claim_page(conn: Connection, key: str) -> ClaimPage | None:
    """A claim's page as objects (for tools and tests), related claims resolved."""
    found = claim_page_json(conn, key)
    return None if found is None else PAGE.validate_json(found[0])


def positions(conn: Connection) -> dict[str, int]:
    """Each projection's lowest checkpoint row. Not its position on a partitioned log, where a partition
    with no event beyond its checkpoint is caught up however low it stands: ``services/projector/applied.py``."""
    return dict(conn.execute(select(checkpoints.c.name, func.min(checkpoints.c.last_seq)).group_by(checkpoints.c.name)).all())


def unreadable(conn: Connection, *, after: int, limit: int) -> list[dict]:
    """Events the projections could not read, in log order after sequence ``after``."""
    query = (
        select(unreadable_events.c.seq, unreadable_events.c.subject, unreadable_events.c.reason)
        .where(unreadable_events.c.seq > after)
        .order_by(unreadable_events.c.seq)
        .limit(limit)
    )
    return [dict(row._mapping) for row in conn.execute(query)]


COUNT_COLUMNS = {relation: claim_pages.c[column] for relation, column in RELATION_COLUMNS.items()}


def claim_counts(conn: Connection, claim_ids: list[str]) -> dict[str, dict]:
    """Counts of each claim found, from the row that also holds its page (written in one statement)."""
    query = select(
        claim_pages.c.claim_id,
        claim_pages.c.last_seq,
        claim_pages.c.sources_active,
        claim_pages.c.sources_withdrawn,
        claim_pages.c.disagreements_open,
        claim_pages.c.disagreements_resolved,
        claim_pages.c.reviews_person,
        claim_pages.c.reviews_ai,
        *(column.label(relation) for relation, column in COUNT_COLUMNS.items()),
    ).where(or_(claim_pages.c.claim_id.in_(claim_ids), claim_pages.c.slug.in_(claim_ids))).order_by(claim_pages.c.first_seq)
    found = {}
    for row in conn.execute(query):
        values = row._mapping
        found[values["claim_id"]] = {
            "claim_id": values["claim_id"],
            "as_of_seq": values["last_seq"],
            "sources_by_relation": {relation: values[relation] for relation in COUNT_COLUMNS},
            **{name: values[name] for name in (
                "sources_active", "sources_withdrawn", "disagreements_open", "disagreements_resolved",
                "reviews_person", "reviews_ai",
            )},
        }
    return found


def scorecard_rows(conn: Connection, capability: str | None) -> list[dict]:
    """Claims per capability, technique, standing and eligibility (one grouped scan of the claim rows)."""
    query = (
        select(
            claim_pages.c.capability,
            claim_pages.c.technique,
            claim_pages.c.standing,
            claim_pages.c.counts_toward_scorecard,
            claim_pages.c.unreviewed_model_draft,
            func.count().label("claims"),
        )
        .where(claim_pages.c.lifecycle == "active")
        .group_by(
            claim_pages.c.capability, claim_pages.c.technique, claim_pages.c.standing,
            claim_pages.c.counts_toward_scorecard, claim_pages.c.unreviewed_model_draft,
        )
    )
    if capability is not None:
        query = query.where(claim_pages.c.capability == capability)
    return [dict(row._mapping) for row in conn.execute(query)]
