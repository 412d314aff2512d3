"""The listing's and search's SQL: which claims a listing shows, in which order, one keyset page at a time.

Each sort walks one index (projections/tables.py) and ends in the claim id, so a page starts right
after the previous page's last (key, claim id). Search is SQLite's FTS5 table or PostgreSQL's
generated tsvector column (migrations 0003 and 0011), ranked by relevance when asked.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import (
    ColumnElement,
    Connection,
    Double,
    Select,
    cast,
    column,
    func,
    literal_column,
    select,
    table,
    tuple_,
)

from projections.page_model import LIFECYCLES
from projections.tables import POSTGRESQL_SEARCH_COLUMN, SEARCH_CONFIG, SQLITE_SEARCH_TABLE, claim_pages
from services.read_api.search_text import fts5_query

# The columns a listing shows of each claim.
SUMMARY_COLUMNS = (
    claim_pages.c.claim_id,
    claim_pages.c.slug,
    claim_pages.c.statement,
    claim_pages.c.capability,
    claim_pages.c.technique,
    claim_pages.c.lifecycle,
    claim_pages.c.review_state,
    claim_pages.c.standing,
    claim_pages.c.revision,
    claim_pages.c.counts_toward_scorecard,
    claim_pages.c.unreviewed_model_draft,
    claim_pages.c.sources_active,
    claim_pages.c.sources_withdrawn,
    claim_pages.c.sources_contradicting,
    claim_pages.c.disagreements_open,
    claim_pages.c.contention,
    claim_pages.c.last_seq,
)

# The orders a listing offers: a walk of one index each (SORT_KEYS), or relevance to a search.
Sort = Literal["id", "recent", "contested", "evidence", "relevance"]
# Each sort's key and whether the largest comes first. Ties go by claim id in the same direction, so that
# (key, claim id) is a total order one index walks (projections/tables.py), and a keyset page starts
# right after the previous page's last (key, claim id).
SORT_KEYS: dict[str, tuple[ColumnElement, bool]] = {
    "id": (claim_pages.c.claim_id, False),
    "recent": (claim_pages.c.last_seq, True),
    "contested": (claim_pages.c.contention, True),
    "evidence": (claim_pages.c.sources_active, True),
}
SEARCH = table(SQLITE_SEARCH_TABLE, column("rowid"))
SEARCH_NAME = literal_column(SQLITE_SEARCH_TABLE)  # how FTS5's MATCH and bm25() name the table
STATEMENT_SEARCH = literal_column(f"{claim_pages.name}.{POSTGRESQL_SEARCH_COLUMN}")  # generated, so undeclared


@dataclass(frozen=True, kw_only=True)
class ClaimFilters:
    """Which claims a listing shows: None keeps every claim on that axis; only active claims by default."""

    q: str | None = None
    capability: str | None = None
    technique: str | None = None
    review_state: str | None = None
    lifecycles: tuple[str, ...] = ("active",)
    open_disagreement: bool | None = None
    contradicted: bool | None = None
    changed_since_seq: int | None = None


def claim_listing(
    conn: Connection, filters: ClaimFilters, *, sort: str, after: tuple[Any, str] | None, limit: int
) -> list[dict]:
    """Up to ``limit`` claim summaries that pass ``filters``, in ``sort`` order, after the position ``after``
    (a sort key and a claim id); each row carries its sort key as ``sort_key``."""
    query = listing_statement(conn.dialect.name, filters, sort=sort, after=after, limit=limit)
    if filters.q is not None and conn.dialect.name == "postgresql":
        # psycopg prepares a statement run five times, and PostgreSQL may then reuse one generic plan, which
        # cannot know how many claims the words match (an index for rare words, a scan for common ones).
        conn.exec_driver_sql("SET LOCAL plan_cache_mode = force_custom_plan")
    return [dict(row._mapping) for row in conn.execute(query)]


def claim_count(conn: Connection, filters: ClaimFilters) -> int:
    """How many claims pass ``filters``: the listing's own conditions and full-text match, counted."""
    query = select(func.count()).select_from(claim_pages).where(*_conditions(filters))
    if filters.q is not None:
        query = _matching(query, conn.dialect.name, filters.q)
    return conn.execute(query).scalar_one()


def listing_statement(
    dialect: str, filters: ClaimFilters, *, sort: str, after: tuple[Any, str] | None, limit: int
) -> Select:
    """The listing's SELECT: a walk of the sort's index, or, with ``q``, a lookup in the full-text index."""
    key, descending = _relevance(dialect, filters.q) if sort == "relevance" else SORT_KEYS[sort]
    columns = (claim_pages.c.claim_id,) if filters.q is not None else SUMMARY_COLUMNS
    query = select(*columns, key.label("sort_key")).where(*_conditions(filters)).limit(limit)
    if filters.q is not None:
        query = _matching(query, dialect, filters.q)
    order = (key,) if key is claim_pages.c.claim_id else (key, claim_pages.c.claim_id)
    if after is not None:
        position, start = tuple_(*order), tuple_(*after[-len(order):])
        query = query.where(position < start if descending else position > start)
    query = query.order_by(*(c.desc() if descending else c for c in order))
    if filters.q is None:
        return query
    # A search may match most claims: sort only their keys, then read the summaries of the page's claims.
    page = query.subquery("page")
    return (
        select(*SUMMARY_COLUMNS, page.c.sort_key)
        .join_from(page, claim_pages, claim_pages.c.claim_id == page.c.claim_id)
        .order_by(*(c.desc() if descending else c for c in (page.c.sort_key, page.c.claim_id)))
    )


def _conditions(filters: ClaimFilters) -> Iterator[ColumnElement[bool]]:
    c = claim_pages.c
    if set(filters.lifecycles) != set(LIFECYCLES):
        yield c.lifecycle.in_(filters.lifecycles)
    for name in ("capability", "technique", "review_state"):
        if getattr(filters, name) is not None:
            yield c[name] == getattr(filters, name)
    for wanted, count in ((filters.open_disagreement, c.disagreements_open), (filters.contradicted, c.sources_contradicting)):
        if wanted is not None:
            yield count > 0 if wanted else count == 0
    if filters.changed_since_seq is not None:
        yield c.last_seq > filters.changed_since_seq


def _relevance(dialect: str, q: str | None) -> tuple[ColumnElement, bool]:
    """How well a statement matches ``q``, best first: PostgreSQL's ts_rank, SQLite's bm25 (lower is better)."""
    if dialect == "sqlite":
        return -func.bm25(SEARCH_NAME), True
    # ts_rank is a real: as a double, the rank a cursor carries compares equal to the rank recomputed.
    return cast(func.ts_rank(STATEMENT_SEARCH, _tsquery(q)), Double), True


def _matching(query: Select, dialect: str, q: str) -> Select:
    """Only claims whose statement matches ``q``, found through the database's full-text index."""
    if dialect == "sqlite":
        joined = query.join_from(claim_pages, SEARCH, SEARCH.c.rowid == claim_pages.c.first_seq)
        return joined.where(SEARCH_NAME.op("MATCH")(fts5_query(q)))
    return query.where(STATEMENT_SEARCH.op("@@")(_tsquery(q)))


def _tsquery(q: str | None) -> ColumnElement:
    return func.websearch_to_tsquery(SEARCH_CONFIG, q)
