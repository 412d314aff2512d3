"""Routes of the read API. Thin: parse the request, run one query, shape the answer."""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import json
import math
import re
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Query
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field

from events.envelope import CLAIM_ID_PATTERN
from projections.page_model import ClaimPage, ReviewState
from services.read_api import queries
from services.read_api.consistency import visible_after
from services.read_api.deps import DB
from services.read_api.errors import ErrorBody, bad_request, not_found

router = APIRouter()
# Reads that take ``?after=SEQ`` / ``Claimlog-After``: answered once the projections have applied SEQ.
Consistent = Depends(visible_after)


Sort = Literal["id", "recent", "contested", "evidence", "relevance"]
Lifecycle = Literal["active", "retracted", "superseded"]


class ClaimSummary(BaseModel):
    """One line of a claim listing."""

    claim_id: str
    slug: str
    statement: str
    capability: str
    technique: str | None
    lifecycle: str
    review_state: str
    standing: str
    revision: int
    counts_toward_scorecard: bool
    unreviewed_model_draft: bool
    sources_active: int
    sources_withdrawn: int
    sources_contradicting: int = Field(description="Active sources that contradict the claim.")
    disagreements_open: int
    contention: int = Field(description="Open disagreements plus active contradicting sources (`sort=contested`).")
    last_seq: int = Field(description="The log sequence of the claim's last change: its version.")


class ClaimList(BaseModel):
    """A page of claims, the order they are in, and the cursor to the next page (None at the end)."""

    sort: Sort
    items: list[ClaimSummary]
    next_cursor: str | None


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
    changed_since_seq: int | None = Field(None, ge=0, description="Only claims changed after this log sequence.")
    sort: Sort | None = Field(None, description=(
        "`id` (claim id), `recent` (last change first), `contested` (most open disagreements plus contradicting "
        "sources first), `evidence` (most active sources first), `relevance` (best match of q first). "
        "Default: relevance with q, id without."
    ))
    limit: int = Field(50, ge=1, le=200, description="Claims per page.")
    cursor: str | None = Field(None, max_length=200, description="next_cursor of the previous page, with the same query.")

    def filters(self) -> queries.ClaimFilters:
        """The filters this query asks for: active claims only unless a lifecycle or include_closed says otherwise."""
        lifecycles = queries.LIFECYCLES if self.include_closed else ("active",)
        return queries.ClaimFilters(
            q=self.q,
            capability=self.capability,
            technique=self.technique,
            review_state=self.review_state,
            lifecycles=tuple(sorted(set(self.lifecycle))) if self.lifecycle else lifecycles,
            open_disagreement=self.open_disagreement,
            contradicted=self.contradicted,
            changed_since_seq=self.changed_since_seq,
        )


@router.get(
    "/claims/{claim_key}",
    response_class=Response,
    responses={200: {"model": ClaimPage, "content": {"application/json": {}}}, 404: {"model": ErrorBody}},
    tags=["claims"],
    dependencies=[Consistent],
)
async def get_claim(claim_key: str, db: DB) -> Response:
    """The claim page, by claim id (CLM-0338) or slug. Its ETag is the claim's version (its last sequence),
    for ``If-Match`` on commands."""
    # One indexed read (well under a millisecond) runs on the event loop: a hop to the thread pool
    # costs more than the query and, on two cores, doubles the page's latency under load.
    with db.connect() as conn:
        found = queries.claim_page_json(conn, claim_key)
    if found is None:
        raise not_found("claim", claim_key)
    page, version = found
    return Response(page, media_type="application/json", headers={"ETag": f'"{version}"'})


@router.get(
    "/claims", response_model=ClaimList, responses={400: {"model": ErrorBody}}, tags=["claims"], dependencies=[Consistent]
)
def list_claims(db: DB, query: Annotated[ListingQuery, Query()]) -> ClaimList:
    """The registry's listing and search: claims that pass every filter given (active ones only, unless asked),
    in one order, a page at a time (pass ``next_cursor`` back as ``cursor`` with the same query). ``q``
    searches statements through the database's own full-text index."""
    sort = query.sort or ("relevance" if query.q is not None else "id")
    if sort == "relevance" and query.q is None:
        raise bad_request("bad_sort", "sort=relevance ranks the claims a search finds: give q as well")
    if query.q is not None and queries.fts5_query(query.q) is None:
        raise bad_request("bad_query", f"q={query.q!r} names no word to look for")
    filters = query.filters()
    fingerprint = _fingerprint(sort, filters)
    after = _decode_position(query.cursor, fingerprint=fingerprint, sort=sort) if query.cursor else None
    with db.connect() as conn:
        rows = queries.claim_listing(conn, filters, sort=sort, after=after, limit=query.limit + 1)
    more = len(rows) > query.limit
    rows = rows[: query.limit]
    next_cursor = _encode_position(fingerprint, rows[-1]["sort_key"], rows[-1]["claim_id"]) if more else None
    return ClaimList(sort=sort, items=[ClaimSummary(**row) for row in rows], next_cursor=next_cursor)


class UnreadableEvent(BaseModel):
    """An event in the log that no projection could read: where it is, and why."""

    seq: int
    subject: str
    reason: str


@router.get("/unreadable-events", response_model=list[UnreadableEvent], tags=["operations"])
def list_unreadable(
    db: DB,
    after: int = Query(0, ge=0, description="Only events after this log sequence."),
    limit: int = Query(100, ge=1, le=1000),
) -> list[UnreadableEvent]:
    """Events published around the command API that failed validation (unknown type, bad payload, a schema
    version from the future). The projections skipped them and went on; each stays in the log."""
    with db.connect() as conn:
        return [UnreadableEvent(**row) for row in queries.unreadable(conn, after=after, limit=limit)]


@router.get("/health", tags=["operations"])
def health(db: DB) -> JSONResponse:
    """Whether the read models can be read, and how far each projection has applied the log."""
    try:
        with db.connect() as conn:
            projections = queries.positions(conn)
    except Exception as error:  # noqa: BLE001 - health reports any failure as unavailable
        body = {"status": "unavailable", "database": type(error).__name__}
        return JSONResponse(body, status_code=503)
    return JSONResponse({"status": "ok", "database": "ok", "projections": projections})


def _fingerprint(sort: str, filters: queries.ClaimFilters) -> str:
    """What a listing cursor is valid for, in 12 characters: the sort and every filter."""
    digest = hashlib.sha256(json.dumps([sort, dataclasses.astuple(filters)]).encode()).digest()
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
    return isinstance(key, int) and not isinstance(key, bool)


def _bad_cursor(message: str) -> HTTPException:
    return bad_request("bad_cursor", message)


def _encode_cursor(claim_id: str) -> str:
    """The claim-id cursor of the HTML listing (services/read_api/pages.py)."""
    return base64.urlsafe_b64encode(claim_id.encode()).decode().rstrip("=")


def _decode_cursor(cursor: str) -> str:
    """The claim id an HTML listing cursor points after; 400 ``bad_cursor`` for any other cursor."""
    try:
        claim_id = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError):
        claim_id = ""
    if not re.fullmatch(CLAIM_ID_PATTERN, claim_id):
        raise bad_request("bad_cursor", "cursor is not one this API returned; start again without it")
    return claim_id
