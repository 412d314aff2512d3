"""Counts and the scorecard: numbers that always match the lists and rules they summarize."""

from __future__ import annotations

from collections import defaultdict
from typing import Annotated

from fastapi import APIRouter, Body, Depends
from pydantic import BaseModel, Field
from sqlalchemy import Engine

from events.envelope import ClaimId
from projections.scorecard import RULES_VERSION, STANDINGS
from services.read_api import queries
from services.read_api.consistency import visible_after
from services.read_api.deps import DB
from services.read_api.errors import ErrorBody, not_found

router = APIRouter(tags=["counts and scorecard"], dependencies=[Depends(visible_after)])
MAX_BATCH = 500


class Counts(BaseModel):
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

    counts: dict[str, Counts]
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
    applied_seq: int
    capabilities: list[CapabilityScore]


@router.get("/claims/{claim_key}/counts", response_model=Counts, responses={404: {"model": ErrorBody}})
async def claim_counts(claim_key: str, db: DB) -> Counts:
    """A claim's counts (by id or slug), from the same row, written in the same statement, as its page."""
    # One indexed read, on the event loop like the claim page: a hop to the thread pool costs more.
    with db.connect() as conn:
        found = queries.claim_counts(conn, [claim_key])
    if not found:
        raise not_found("claim", claim_key)
    return Counts(**next(iter(found.values())))


@router.post("/claims/counts", response_model=CountsBatch)
def many_counts(
    db: DB, claim_ids: Annotated[list[ClaimId], Body(embed=True, min_length=1, max_length=MAX_BATCH)]
) -> CountsBatch:
    """Counts of up to 500 claims in one read."""
    with db.connect() as conn:
        found = queries.claim_counts(conn, list(dict.fromkeys(claim_ids)))
    return CountsBatch(
        counts={claim_id: Counts(**values) for claim_id, values in found.items()},
        missing=[claim_id for claim_id in dict.fromkeys(claim_ids) if claim_id not in found],
    )


@router.get("/scorecard", response_model=Scorecard)
def scorecard(db: DB) -> Scorecard:
    """Every capability's scorecard."""
    return read_scorecard(db, None)


@router.get("/scorecard/{capability}", response_model=Scorecard, responses={404: {"model": ErrorBody}})
def capability_scorecard(capability: str, db: DB) -> Scorecard:
    """One capability's scorecard, with its techniques."""
    card = read_scorecard(db, capability)
    if not card.capabilities:
        raise not_found("capability", capability)
    return card


def read_scorecard(db: Engine, capability: str | None) -> Scorecard:
    """The scorecard of every capability (or of one), from one grouped read of the claim rows."""
    with db.connect() as conn:
        rows = queries.scorecard_rows(conn, capability)
        applied = min(queries.positions(conn).values(), default=0)
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
    return Scorecard(rules_version=RULES_VERSION, applied_seq=applied, capabilities=capabilities)


def _tally(rows: list[dict]) -> dict:
    by_standing = dict.fromkeys(STANDINGS, 0)
    left_out = 0
    for row in rows:
        if row["counts_toward_scorecard"]:
            by_standing[row["standing"]] += row["claims"]
        elif row["unreviewed_model_draft"]:
            left_out += row["claims"]
    return {"claims_counted": sum(by_standing.values()), "by_standing": by_standing, "unreviewed_model_drafts_left_out": left_out}
