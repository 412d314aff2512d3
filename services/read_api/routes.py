"""Routes of the read API. Thin: parse the request, run one query, shape the answer."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response
from pydantic import BaseModel, Field, computed_field
from sqlalchemy import Engine

from projections.page_model import ClaimPage
from services.read_api import queries
from services.read_api.as_of import AsOfSeq, AsOfTime, as_of_point, claim_page_as_of, listing_as_of
from services.read_api.consistency import visible_after
from services.read_api.deps import DB
from services.read_api.errors import ErrorBody, not_found
from services.read_api.listing import Listing, ListingQuery, Sort, read_listing
from services.read_api.reads import read
from services.read_api.sequences import Seq

router = APIRouter()
# Reads that take ``?after=SEQ`` / ``Claimlog-After``: answered once the projections have applied SEQ.
Consistent = Depends(visible_after)


class ClaimSummary(BaseModel):
    """One line of a claim listing."""

    claim_id: str
    slug: str
    statement: str
    capability: str
    technique: str | None
    lifecycle: str
    review_state: str
    standing: str = Field(description="Deprecated: read `evidence` and `counted_standing` (see CHANGELOG.md).")
    revision: int
    counts_toward_scorecard: bool
    unreviewed_model_draft: bool
    sources_active: int
    sources_withdrawn: int
    sources_contradicting: int = Field(description="Active sources that contradict the claim.")
    disagreements_open: int
    contention: int = Field(description="Open disagreements plus active contradicting sources (`sort=contested`).")
    last_seq: int = Field(description="The log sequence of the claim's last change: its version.")

    @computed_field(description="What the claim's active sources say, whether or not the claim counts.")
    @property
    def evidence(self) -> str:
        return self.standing

    @computed_field(description="The standing the claim gives its technique; null when it counts for none.")
    @property
    def counted_standing(self) -> str | None:
        return self.standing if self.counts_toward_scorecard else None


class ClaimList(BaseModel):
    """A page of claims, the order they are in, and the cursor to the next page (None at the end)."""

    sort: Sort
    items: list[ClaimSummary]
    next_cursor: str | None
    as_of_seq: int | None = Field(None, description="With as_of_seq or as_of: the log sequence the listing stands at.")


@router.get(
    "/claims/{claim_key}",
    response_class=Response,
    responses={
        200: {"model": ClaimPage, "content": {"application/json": {}}},
        404: {"model": ErrorBody},
    },
    tags=["claims"],
    dependencies=[Consistent],
)
async def get_claim(
    claim_key: str, db: DB, request: Request, as_of_seq: AsOfSeq = None, as_of: AsOfTime = None
) -> Response:
    """The claim page, by claim id (CLM-0338) or slug. Its ETag is the claim's version (its last sequence),
    for ``If-Match`` on commands. With ``as_of_seq`` or ``as_of``: the page as it stood then, folded from the log."""
    if (point := as_of_point(as_of_seq, as_of)) is not None:
        return await claim_page_as_of(request, db, claim_key, point)
    # One indexed read: on the event loop with SQLite, in a worker thread with PostgreSQL (reads.py).
    found = await read(db, queries.claim_page_json, claim_key)
    if found is None:
        raise not_found("claim", claim_key)
    page, version = found
    return Response(page, media_type="application/json", headers={"ETag": f'"{version}"'})


@router.get(
    "/claims", response_model=ClaimList, tags=["claims"], dependencies=[Consistent]
)
async def list_claims(
    db: DB, request: Request, query: Annotated[ListingQuery, Query()], as_of_seq: AsOfSeq = None, as_of: AsOfTime = None
) -> ClaimList:
    """The registry's listing and search: claims that pass every filter given (active ones only, unless asked),
    in one order, a page at a time (pass ``next_cursor`` back as ``cursor`` with the same query). ``q``
    searches statements through the database's own full-text index. With ``as_of_seq`` or ``as_of``: the
    listing as it stood then, every claim folded from the log, ``q`` searching the statements as they were
    then by the same rules (ranked by BM25; see docs/api.md)."""
    if (point := as_of_point(as_of_seq, as_of)) is not None:
        seq, listing, _ = await listing_as_of(request, query, point)
    else:
        seq, listing = None, await run_in_threadpool(_read_listing, db, query)
    items = [ClaimSummary(**row) for row in listing.rows]
    return ClaimList(sort=listing.sort, items=items, next_cursor=listing.next_cursor, as_of_seq=seq)


def _read_listing(db: Engine, query: ListingQuery) -> Listing:
    with db.connect() as conn:
        return read_listing(conn, query)


class UnreadableEvent(BaseModel):
    """An event in the log that no projection could read: where it is, and why."""

    seq: int
    subject: str
    reason: str


@router.get("/unreadable-events", response_model=list[UnreadableEvent], tags=["operations"])
def list_unreadable(
    db: DB,
    after: Annotated[Seq, Query(description="Only events after this log sequence.")] = 0,
    limit: int = Query(100, ge=1, le=1000),
) -> list[UnreadableEvent]:
    """Events published around the command API that failed validation (unknown type, bad payload, a schema
    version from the future). The projections skipped them and went on; each stays in the log."""
    with db.connect() as conn:
        return [UnreadableEvent(**row) for row in queries.unreadable(conn, after=after, limit=limit)]
