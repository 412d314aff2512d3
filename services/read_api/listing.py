"""The registry's listing and search, shared by ``GET /claims`` and the listing page: what a query asks for,
one keyset page of it, and cursors bound to the query they came from."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import math
import re
from collections.abc import Callable
from typing import Any

from fastapi import HTTPException
from pydantic import BaseModel, Field
from sqlalchemy import Connection

from events.envelope import CLAIM_ID_PATTERN
from projections.page_model import LIFECYCLES, Lifecycle, ReviewState
from services.read_api import listing_sql
from services.read_api.errors import bad_request
from services.read_api.listing_sql import SORT_KEYS, Sort
from services.read_api.search_text import StatementIndex
from services.read_api.sequences import Seq, fits_int64


class ListingQuery(BaseModel):
    """What ``GET /claims`` lists: filters (all must hold), an order, and where the page starts."""

    q: str | None = Field(None, max_length=200, description=(
        'Full-text search over statements, in web-search syntax: every word (stemmed: "plans" finds '
        '"planning"), "a phrase", -excluded, `or` between alternatives.'
    ))
    capability: str | None = Field(None, max_length=500, description="Only claims of this capability.")
    technique: str | None = Field(None, max_length=500, description="Only claims of this technique.")
    review_state: ReviewState | None = Field(None, description="Only claims with this review label.")
    lifecycle: list[Lifecycle] = Field([], description="Only claims in these lifecycles (repeatable). Default: active.")
    include_closed: bool = Field(False, description="Retracted and superseded claims as well (unless lifecycle is given).")
    open_disagreement: bool | None = Field(None, description="Only claims with (true) or without (false) an open disagreement.")
    contradicted: bool | None = Field(None, description="Only claims with (true) or without (false) an active contradicting source.")
    changed_since_seq: Seq | None = Field(None, description="Only claims changed after this log sequence.")
    sort: Sort | None = Field(None, description=(
        "`id` (claim id), `recent` (last change first), `contested` (most open disagreements plus contradicting "
        "sources first), `evidence` (most active sources first), `relevance` (best match of q first). "
        "Default: relevance with q, id without."
    ))
    limit: int = Field(50, ge=1, le=200, description="Claims per page.")
    cursor: str | None = Field(None, max_length=200, description="next_cursor of the previous page, with the same query.")

    def filters(self) -> listing_sql.ClaimFilters:
        """The filters this query asks for: active claims only unless a lifecycle or include_closed says otherwise."""
        lifecycles = LIFECYCLES if self.include_closed else ("active",)
        return listing_sql.ClaimFilters(
            q=self.q,
            capability=self.capability,
            technique=self.technique,
            review_state=self.review_state,
            lifecycles=tuple(sorted(set(self.lifecycle))) if self.lifecycle else lifecycles,
            open_disagreement=self.open_disagreement,
            contradicted=self.contradicted,
            changed_since_seq=self.changed_since_seq,
        )


@dataclasses.dataclass(frozen=True)
class Listing:
    """One page of a listing: its order, its claims (summaries with their ``sort_key``), the next page's cursor."""

    sort: Sort
    rows: list[dict]
    next_cursor: str | None


def read_listing(conn: Connection, query: ListingQuery) -> Listing:
    """The page of claims ``query`` asks for; 400 (``bad_sort``, ``bad_query``, ``bad_cursor``) when it cannot be
    answered."""
    sort = _sort(query)
    filters = query.filters()
    fingerprint = _fingerprint(sort, filters)
    after = _decode_position(query.cursor, fingerprint=fingerprint, sort=sort) if query.cursor else None
    rows = listing_sql.claim_listing(conn, filters, sort=sort, after=after, limit=query.limit + 1)
    more = len(rows) > query.limit
    rows = rows[: query.limit]
    next_cursor = _encode_position(fingerprint, rows[-1]["sort_key"], rows[-1]["claim_id"]) if more else None
    return Listing(sort, rows, next_cursor)


def _sort(query: ListingQuery) -> Sort:
    """The order asked for (relevance with q, id without, by default); 400 ``bad_sort`` or ``bad_query`` for a
    search that cannot be made."""
    sort = query.sort or ("relevance" if query.q is not None else "id")
    if sort == "relevance" and query.q is None:
        raise bad_request("bad_sort", "sort=relevance ranks the claims a search finds: give q as well")
    if query.q is not None and listing_sql.fts5_query(query.q) is None:
        raise bad_request("bad_query", f"q={query.q!r} names no word to look for")
    return sort


def read_past_listing(
    rows: list[dict], query: ListingQuery, as_of_seq: int, *, statements: Callable[[], StatementIndex]
) -> tuple[Listing, int]:
    """The page of claims ``query`` asks for among ``rows``, every claim's summary as of ``as_of_seq`` (folded from
    the log), in the orders and with the filters and cursors of ``read_listing``; and how many claims match.

    A search (``q``) looks in those summaries' statements through ``statements()``, their index
    (``search_text``, by the database's own search code): the database's full-text index holds the
    statements as they are now."""
    sort = _sort(query)
    filters = query.filters()
    fingerprint = _fingerprint(sort, filters, as_of_seq)
    after = _decode_position(query.cursor, fingerprint=fingerprint, sort=sort) if query.cursor else None
    scores = statements().scores(query.q) if query.q is not None else {}
    column, descending = (None, True) if sort == "relevance" else SORT_KEYS[sort]

    def key(row: dict) -> Any:
        return scores[row["claim_id"]] if column is None else row[column.name]

    def position(row: dict) -> tuple:
        return key(row), row["claim_id"]

    found = (row for row in rows if _passes(row, filters) and (query.q is None or row["claim_id"] in scores))
    matching = sorted(found, key=position, reverse=descending)
    total = len(matching)
    if after is not None:
        matching = [row for row in matching if (position(row) < after if descending else position(row) > after)]
    shown = [{**row, "sort_key": key(row)} for row in matching[: query.limit]]
    more = len(matching) > query.limit
    next_cursor = _encode_position(fingerprint, shown[-1]["sort_key"], shown[-1]["claim_id"]) if more else None
    return Listing(sort, shown, next_cursor), total


def _passes(row: dict, filters: listing_sql.ClaimFilters) -> bool:
    """Whether a claim's summary passes the filters, as ``listing_sql`` writes them in SQL."""
    if row["lifecycle"] not in filters.lifecycles:
        return False
    if any(getattr(filters, name) is not None and row[name] != getattr(filters, name)
           for name in ("capability", "technique", "review_state")):
        return False
    for wanted, count in ((filters.open_disagreement, "disagreements_open"), (filters.contradicted, "sources_contradicting")):
        if wanted is not None and (row[count] > 0) != wanted:
            return False
    return filters.changed_since_seq is None or row["last_seq"] > filters.changed_since_seq


def _fingerprint(sort: str, filters: listing_sql.ClaimFilters, as_of_seq: int | None = None) -> str:
    """What a listing cursor is valid for, in 12 characters: the sort, every filter and, for a past listing, its
    point of the log."""
    shape = [sort, dataclasses.astuple(filters)] + ([as_of_seq] if as_of_seq is not None else [])
    digest = hashlib.sha256(json.dumps(shape).encode()).digest()
    return base64.urlsafe_b64encode(digest[:9]).decode()


def _encode_position(fingerprint: str, key: Any, claim_id: str) -> str:
    """An opaque cursor: the listing it belongs to, and the sort key and claim id of the last claim shown."""
    payload = json.dumps([fingerprint, key, claim_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(payload).decode().rstrip("=")


def _decode_position(cursor: str, *, fingerprint: str, sort: str) -> tuple[Any, str]:
    """The (sort key, claim id) a cursor of this listing points after; 400 ``bad_cursor`` for any other."""
    try:
        found, key, claim_id = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, TypeError):  # bad base64, bad UTF-8, bad JSON, not three items
        raise _bad_cursor("cursor is not one this API returned; start again without it") from None
    if found != fingerprint:
        raise _bad_cursor("cursor belongs to a listing with another sort or other filters; start again without it")
    if not (isinstance(claim_id, str) and re.fullmatch(CLAIM_ID_PATTERN, claim_id) and _fits(sort, key)):
        raise _bad_cursor("cursor is not one this API returned; start again without it")
    return key, claim_id


def _fits(sort: str, key: Any) -> bool:
    if sort == "id":
        return isinstance(key, str) and re.fullmatch(CLAIM_ID_PATTERN, key) is not None
    if sort == "relevance":
        return isinstance(key, int | float) and not isinstance(key, bool) and math.isfinite(key)
    return isinstance(key, int) and not isinstance(key, bool) and fits_int64(key)


def _bad_cursor(message: str) -> HTTPException:
    return bad_request("bad_cursor", message)
