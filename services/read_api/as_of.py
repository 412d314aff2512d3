"""Reads as of a past point of the log: ``?as_of_seq=N`` or ``?as_of=TIME`` on a claim page and on the scorecard.

The page is folded from the claim's own events (read without scanning the log) by the projector's code, and
shaped as the live route shapes the stored page, so the two answers are the same JSON.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import HTTPException, Query, Request
from fastapi.responses import Response
from pydantic import WithJsonSchema
from sqlalchemy import Engine

from services.log import ClaimLog, LogError
from services.read_api.api_state import api_state
from services.read_api.as_of_pages import claim_of_slug, shaped_page
from services.read_api.errors import bad_request, not_found
from services.read_api.listing import Listing, ListingQuery, read_past_listing
from services.read_api.search_text import StatementIndex
from services.read_api.sequences import SEQ_TEXT_PATTERN
from services.timeline.as_of import AsOf, BadAsOf, is_claim_id, page_json_as_of, parse_as_of
from services.timeline.cache import ClaimEvents
from services.timeline.scorecard import RegistryHistory

AsOfSeq = Annotated[
    str | None,
    Query(description="As the log stood at this sequence: the events up to it, folded (0 or more)."),
    WithJsonSchema({"type": "string", "pattern": SEQ_TEXT_PATTERN}),
]
# Times the API reads (``services/timeline/as_of.py``), as a pattern a generated client can check: ISO 8601
# with a zone. The API reads more (any day of a month, other separators); the pattern names none it refuses.
AS_OF_PATTERN = (
    r"^[1-9][0-9]{3}-(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])T(?:[01][0-9]|2[0-3]):[0-5][0-9]"
    r"(?::[0-5][0-9](?:\.[0-9]{3}|\.[0-9]{6})?)?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])$"
)
AsOfTime = Annotated[
    str | None,
    Query(description="As the log stood at this time (ISO 8601 with a zone): the events stored at or before it."),
    WithJsonSchema({"type": "string", "pattern": AS_OF_PATTERN}),
]


def as_of_point(as_of_seq: str | None, as_of: str | None) -> AsOf | None:
    """The point asked for, or None for the live read; 400 ``bad_as_of`` with the reason."""
    try:
        return parse_as_of(as_of_seq, as_of)
    except BadAsOf as error:
        raise bad_request("bad_as_of", str(error)) from None


def connected_log(request: Request) -> ClaimLog:
    """The app's connection to the log; 503 without one."""
    claim_log = api_state(request.app).claim_log
    if claim_log is None:
        raise HTTPException(503, detail={"error": "not_connected", "message": "this API process has no connection to the log"})
    return claim_log


async def claim_page_as_of(request: Request, db: Engine, claim_key: str, as_of: AsOf) -> Response:
    """The claim page (by id or slug) as it stood at ``as_of``; 404 if it was not drafted by then."""
    claim_log = connected_log(request)
    claim_id = claim_id_of(db, claim_key)
    try:
        doc = await page_json_as_of(claim_log, claim_id, as_of, cache=claim_events(request), snapshots=db)
    except LogError as error:
        raise HTTPException(503, detail={"error": "log_unavailable", "message": str(error)}) from None
    if doc is None:
        raise HTTPException(404, detail={"error": "claim_not_found", "message": f"no claim {claim_key!r} as of {as_of}"})
    with db.connect() as conn:
        return Response(shaped_page(conn, doc.decode(), as_of), media_type="application/json")


def claim_events(request: Request) -> ClaimEvents:
    """The app's cache of claims' events."""
    return api_state(request.app).pasts.claim_events


def claim_id_of(db: Engine, claim_key: str) -> str:
    """The claim id of a claim key (an id as it is, a slug through the claim pages); 404 for an unknown slug."""
    if is_claim_id(claim_key):
        return claim_key
    with db.connect() as conn:
        found = claim_of_slug(conn, claim_key)
    if found is None:
        raise not_found("claim", claim_key)
    return found


def _history(request: Request) -> RegistryHistory:
    return api_state(request.app).pasts.registry_history


async def scorecard_rows_as_of(request: Request, as_of: AsOf, capability: str | None) -> tuple[int, list[dict]]:
    """The scorecard rows of every claim (or one capability) folded from the log up to ``as_of``, and its sequence."""
    claim_log = connected_log(request)
    try:
        return await _history(request).rows(claim_log, as_of, capability)
    except LogError as error:
        raise HTTPException(503, detail={"error": "log_unavailable", "message": str(error)}) from None


async def listing_as_of(request: Request, query: ListingQuery, as_of: AsOf) -> tuple[int, Listing, int]:
    """The listing ``query`` asks for, as it stood at ``as_of``: the sequence it stands for, the page, and how many
    claims match; 400 as ``read_listing`` refuses. A search looks in the statements of the summaries folded for
    the point, indexed once per point by the database's own search code (``search_text``)."""
    claim_log = connected_log(request)
    state = api_state(request.app)
    try:
        seq, rows = await _history(request).summaries(claim_log, as_of)
    except LogError as error:
        raise HTTPException(503, detail={"error": "log_unavailable", "message": str(error)}) from None

    def statements() -> StatementIndex:
        return state.pasts.statement_indexes.at(seq, state.reads.engine, rows)

    # Off the event loop and out of the plain pages' threads: a search may index every claim's statement first.
    listing, total = await state.pasts.statement_indexes.run(lambda: read_past_listing(rows, query, seq, statements=statements))
    return seq, listing, total
