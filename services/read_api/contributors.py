"""``GET /contributors/{actor}``: what one actor brought to the registry, and what became of it."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel
from sqlalchemy import Connection, func, select

from events.source import RELATIONS
from projections.tables import contributor_activity, contributor_disagreements, contributor_sources
from services.read_api.consistency import visible_after
from services.read_api.deps import DB
from services.read_api.errors import ErrorBody, not_found
from services.read_api.sequences import Seq

router = APIRouter(tags=["contributors"], dependencies=[Depends(visible_after)])


class Activity(BaseModel):
    """One thing the actor did."""

    seq: int
    at: datetime
    claim_id: str
    event_type: str
    subject_id: str | None


class Disagreements(BaseModel):
    """Disagreements the actor filed, by outcome."""

    filed: int
    open: int
    upheld: int
    rejected: int
    withdrawn: int


class Contributor(BaseModel):
    """An actor's record: claims drafted, sources by relation and their fate, disagreements, reviews, activity."""

    actor_id: str
    kinds: list[str]
    models: list[str]
    claims_drafted: int
    sources_brought: dict[str, int]
    sources_withdrawn: int
    sources_corrected: int
    disagreements: Disagreements
    reviews_given: int
    reviews_withdrawn: int
    activity: list[Activity]
    next_before: int | None  # pass as ``before`` for older activity


@router.get("/contributors/{actor_id}", response_model=Contributor, responses={404: {"model": ErrorBody}})
def contributor(
    actor_id: str,
    db: DB,
    before: Annotated[Seq | None, Query(ge=1, description="Activity before this log sequence (paging back).")] = None,
    limit: int = Query(50, ge=1, le=500, description="Activity lines per page."),
) -> Contributor:
    """An actor's contributions, newest activity first."""
    with db.connect() as conn:
        if conn.dialect.name == "postgresql":  # one snapshot for every read of the record
            conn = conn.execution_options(isolation_level="REPEATABLE READ")
        record = contributor_record(conn, actor_id, before=before, limit=limit)
    if record is None:
        raise not_found("contributor", actor_id)
    return record


def contributor_record(conn: Connection, actor_id: str, *, before: int | None, limit: int) -> Contributor | None:
    """The record, read in one transaction so its numbers and lists agree."""
    act = contributor_activity.c
    by_type = dict(
        conn.execute(select(act.event_type, func.count()).where(act.actor_id == actor_id).group_by(act.event_type)).all()
    )
    if not by_type:
        return None
    identities = conn.execute(select(act.actor_kind, act.actor_model).where(act.actor_id == actor_id).distinct()).all()
    brought, withdrawn, corrected = _sources_brought(conn, actor_id)
    activity, next_before = _activity_page(conn, actor_id, before=before, limit=limit)
    return Contributor(
        actor_id=actor_id,
        kinds=sorted({kind for kind, _ in identities}),
        models=sorted({model for _, model in identities if model}),
        claims_drafted=by_type.get("ClaimDrafted", 0),
        sources_brought=brought,
        sources_withdrawn=withdrawn,
        sources_corrected=corrected,
        disagreements=_disagreements_filed(conn, actor_id),
        reviews_given=by_type.get("ReviewRecorded", 0),
        reviews_withdrawn=by_type.get("ReviewWithdrawn", 0),
        activity=activity,
        next_before=next_before,
    )


def _sources_brought(conn: Connection, actor_id: str) -> tuple[dict[str, int], int, int]:
    """The actor's sources still attached, by relation; how many were withdrawn; how many corrected."""
    src = contributor_sources.c
    sources = conn.execute(
        select(src.relation, src.withdrawn, func.count())
        .where(src.brought_by == actor_id)
        .group_by(src.relation, src.withdrawn)
    ).all()
    corrected = conn.execute(select(func.count()).where(src.brought_by == actor_id, src.corrections > 0)).scalar_one()
    brought = dict.fromkeys(RELATIONS, 0)
    withdrawn = 0
    for relation, is_withdrawn, count in sources:
        if is_withdrawn:
            withdrawn += count
        else:
            brought[relation] += count
    return brought, withdrawn, corrected


def _disagreements_filed(conn: Connection, actor_id: str) -> Disagreements:
    dis = contributor_disagreements.c
    outcomes = dict(
        conn.execute(select(dis.outcome, func.count()).where(dis.filed_by == actor_id).group_by(dis.outcome)).all()
    )
    return Disagreements(
        filed=sum(outcomes.values()),
        open=outcomes.get(None, 0),
        upheld=outcomes.get("upheld", 0),
        rejected=outcomes.get("rejected", 0),
        withdrawn=outcomes.get("withdrawn", 0),
    )


def _activity_page(conn: Connection, actor_id: str, *, before: int | None, limit: int) -> tuple[list[Activity], int | None]:
    """Up to ``limit`` of the actor's events, newest first, before sequence ``before``; and where the next page starts."""
    act = contributor_activity.c
    query = select(act.seq, act.at, act.claim_id, act.event_type, act.subject_id).where(act.actor_id == actor_id)
    if before is not None:
        query = query.where(act.seq < before)
    rows = conn.execute(query.order_by(act.seq.desc()).limit(limit + 1)).all()
    more = len(rows) > limit
    rows = rows[:limit]
    return [Activity(**row._mapping) for row in rows], rows[-1].seq if more else None
