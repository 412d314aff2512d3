"""Counts and the scorecard: numbers that always match the lists and rules they summarize."""

from __future__ import annotations

from collections import defaultdict
from typing import Annotated

from fastapi import APIRouter, Body, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sqlalchemy import Engine
from starlette.concurrency import run_in_threadpool

from events.envelope import ClaimId
from projections.scorecard import RULES_VERSION, STANDINGS
from services.read_api import lag, queries
from services.read_api.as_of import AsOfSeq, AsOfTime, as_of_point, scorecard_rows_as_of
from services.read_api.consistency import visible_after
from services.read_api.deps import DB
from services.read_api.errors import ErrorBody, not_found
from services.read_api.reads import read
from services.timeline.as_of import AsOf

router = APIRouter(tags=["counts and scorecard"], dependencies=[Depends(visible_after)])
MAX_BATCH = 500


class ClaimCounts(BaseModel):
    """A claim's counts, as of the log sequence of its last applied event."""

    claim_id: str
    as_of_seq: int
    sources_by_relation: dict[str, int]
    sources_active: int
    sources_withdrawn: int
    disagreements_open: int
    disagreements_resolved: int
    reviews_person: int
    reviews_ai: int


class CountsBatch(BaseModel):
    """Counts of the claims found, and the ids that were not."""

    counts: dict[str, ClaimCounts]
    missing: list[str]


class Standing(BaseModel):
    """Claims that count, by standing; and the unreviewed model drafts left out."""

    claims_counted: int
    by_standing: dict[str, int] = Field(description=f"One of {', '.join(STANDINGS)}.")
    unreviewed_model_drafts_left_out: int


class TechniqueScore(Standing):
    technique: str


class CapabilityScore(Standing):
    capability: str
    techniques: list[TechniqueScore]


class Scorecard(BaseModel):
    """Per capability (and per technique where claims name one), under the rules of ``rules_version``."""

    rules_version: int
    # Every event of the log at or below it is counted (later ones may be too); None when the API cannot
    # ask the log which partitions are caught up (``claimlog api --read-only`` on a partitioned log).
    applied_seq: int | None
    capabilities: list[CapabilityScore]


@router.get("/claims/{claim_key}/counts", response_model=ClaimCounts, responses={404: {"model": ErrorBody}})
async def claim_counts(claim_key: str, db: DB) -> ClaimCounts:
    """A claim's counts (by id or slug), from the same row, written in the same statement, as its page."""
    # One indexed read, run where it costs the loop least, like the claim page (reads.py).
    found = await read(db, queries.claim_counts, [claim_key])
    if not found:
        raise not_found("claim", claim_key)
    return ClaimCounts(**next(iter(found.values())))


@router.post("/claims/counts", response_model=CountsBatch)
def many_counts(
    db: DB, claim_ids: Annotated[list[ClaimId], Body(embed=True, min_length=1, max_length=MAX_BATCH)]
) -> CountsBatch:
    """ClaimCounts of up to 500 claims in one read."""
    with db.connect() as conn:
        found = queries.claim_counts(conn, list(dict.fromkeys(claim_ids)))
    return CountsBatch(
        counts={claim_id: ClaimCounts(**values) for claim_id, values in found.items()},
        missing=[claim_id for claim_id in dict.fromkeys(claim_ids) if claim_id not in found],
    )


# Every other method of /claims/counts: without this route GET reached the claim page (a claim named
# "counts") and OPTIONS answered with the claim page's methods. Included before the claim page's route.
counts_methods = APIRouter()


@counts_methods.api_route(
    "/claims/counts", methods=["GET", "HEAD", "OPTIONS", "PUT", "PATCH", "DELETE"], include_in_schema=False
)
def counts_take_post() -> JSONResponse:
    """405 naming the one method served."""
    message = 'the batch counts are read with POST /claims/counts {"claim_ids": [...]}; one claim\'s with GET /claims/{id}/counts'
    return JSONResponse({"error": "method_not_allowed", "message": message}, status_code=405, headers={"Allow": "POST"})


@router.get("/scorecard", response_model=Scorecard)
async def scorecard(request: Request, db: DB, as_of_seq: AsOfSeq = None, as_of: AsOfTime = None) -> Scorecard:
    """Every capability's scorecard; with ``as_of_seq`` or ``as_of``, as it stood then (``applied_seq`` is that
    point's sequence), folded from the log."""
    return await scorecard_at(request, db, None, as_of_point(as_of_seq, as_of))


@router.get("/scorecard/{capability}", response_model=Scorecard, responses={404: {"model": ErrorBody}})
async def capability_scorecard(
    request: Request, capability: str, db: DB, as_of_seq: AsOfSeq = None, as_of: AsOfTime = None
) -> Scorecard:
    """One capability's scorecard, with its techniques; with ``as_of_seq`` or ``as_of``, as it stood then."""
    card = await scorecard_at(request, db, capability, as_of_point(as_of_seq, as_of))
    if not card.capabilities:
        raise not_found("capability", capability)
    return card


async def scorecard_at(request: Request, db: Engine, capability: str | None, as_of: AsOf | None) -> Scorecard:
    """The scorecard now (``as_of`` None), or folded from the log as it stood at ``as_of``."""
    if as_of is None:
        position = await lag.applied(request.app, db)  # before the rows: they hold at least what it says
        return await run_in_threadpool(read_scorecard, db, capability, applied_seq=_lowest(position.positions))
    seq, rows = await scorecard_rows_as_of(request, as_of, capability)
    return tally_scorecard(rows, applied_seq=seq)


def read_scorecard(db: Engine, capability: str | None, *, applied_seq: int | None) -> Scorecard:
    """The scorecard of every capability (or of one), from one grouped read of the claim rows."""
    with db.connect() as conn:
        rows = queries.scorecard_rows(conn, capability)
    return tally_scorecard(rows, applied_seq=applied_seq)


def _lowest(positions: dict[str, int | None]) -> int | None:
    """The position of every projection at once (None when any is unknown)."""
    return None if None in positions.values() else min(positions.values(), default=0)


def tally_scorecard(rows: list[dict], *, applied_seq: int | None) -> Scorecard:
    """The scorecard of claim rows grouped as ``queries.scorecard_rows`` groups them: live, or folded as of a point."""
    by_capability: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        by_capability[row["capability"]].append(row)
    capabilities = []
    for name in sorted(by_capability):
        group = by_capability[name]
        techniques = defaultdict(list)
        for row in group:
            if row["technique"]:
                techniques[row["technique"]].append(row)
        capabilities.append(
            CapabilityScore(
                capability=name,
                **_tally(group),
                techniques=[TechniqueScore(technique=t, **_tally(techniques[t])) for t in sorted(techniques)],
            )
        )
    return Scorecard(rules_version=RULES_VERSION, applied_seq=applied_seq, capabilities=capabilities)


def _tally(rows: list[dict]) -> dict:
    by_standing = dict.fromkeys(STANDINGS, 0)
    left_out = 0
    for row in rows:
        if row["counts_toward_scorecard"]:
            by_standing[row["standing"]] += row["claims"]
        elif row["unreviewed_model_draft"]:
            left_out += row["claims"]
    return {"claims_counted": sum(by_standing.values()), "by_standing": by_standing, "unreviewed_model_drafts_left_out": left_out}
