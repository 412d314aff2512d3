"""``GET /claims/{id}/history``: every event of a claim, who acted, and what each revision changed."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request
from pydantic import BaseModel, Field, WithJsonSchema

from events import EVENT_TYPES, Actor, ActorKind
from services.admission import gate_for
from services.log import LogError
from services.read_api.as_of import claim_events, claim_id_of, connected_log
from services.read_api.deps import DB
from services.read_api.errors import ErrorBody, bad_request, not_found
from services.read_api.sequences import Seq
from services.timeline.history import claim_history, select_entries

router = APIRouter(tags=["claims"])


class FieldChange(BaseModel):
    """A field of the page before and after the event (``sources.<id>.<field>`` for a source's fields)."""

    field: str
    before: Any
    after: Any


class HistoryEvent(BaseModel):
    """One event of the claim as the log holds it, and what it changed on the page."""

    seq: int
    stored_at: datetime = Field(description="When the log stored it (what ?as_of= compares with).")
    type: str
    event_id: str | None
    occurred_at: datetime | None
    actor: Actor | None
    revision: int | None = Field(description="The claim's revision once the event was applied.")
    diff: list[FieldChange] | None = Field(description="For ClaimDrafted, ClaimRevised and SourceCorrected: fields changed.")
    unreadable: str | None = Field(None, description="Why the projections could not read this event (then skipped).")


class ClaimHistory(BaseModel):
    """A page of the claim's history, in log order; ask again with ``after_seq=next_after_seq`` (None at the end)."""

    claim_id: str
    events: list[HistoryEvent]
    next_after_seq: int | None


@router.get(
    "/claims/{claim_key}/history",
    response_model=ClaimHistory,
    responses={404: {"model": ErrorBody}},
)
async def get_history(
    claim_key: str,
    db: DB,
    request: Request,
    type: Annotated[  # noqa: A002
        list[str],
        Query(description="Only events of these types (repeatable); another is `400 bad_type`."),
        WithJsonSchema({"type": "array", "items": {"type": "string", "enum": list(EVENT_TYPES)}}),
    ] = [],  # noqa: B006
    actor_kind: Annotated[ActorKind | None, Query(description="Only events by a person, a model or a service.")] = None,
    after_seq: Annotated[Seq, Query(description="Only events after this log sequence.")] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> ClaimHistory:
    """Every event of the claim (by id or slug) in log order, with its sequence, stored time, type and actor, and
    for revisions and source corrections the fields they changed, folded from the claim's events in the log.
    The draft (the first revision) is always listed, whatever the filters."""
    unknown = sorted(set(type) - set(EVENT_TYPES))
    if unknown:
        raise bad_request("bad_type", f"no event type {', '.join(map(repr, unknown))}; types are {', '.join(EVENT_TYPES)}")
    claim_id = claim_id_of(db, claim_key)
    try:
        claim_log = connected_log(request)
        stored = await claim_events(request).read(claim_log, claim_id)
        gate = await gate_for(claim_log, (item.signature for item in stored))
    except LogError as error:
        raise HTTPException(503, detail={"error": "log_unavailable", "message": str(error)}) from None
    entries = claim_history(claim_id, stored, gate=gate)
    if entries is None:
        raise not_found("claim", claim_key)
    kind = actor_kind.value if actor_kind else None
    page, next_after = select_entries(entries, types=set(type), actor_kind=kind, after_seq=after_seq, limit=limit)
    return ClaimHistory(
        claim_id=claim_id,
        events=[HistoryEvent(**{**vars(e), "diff": [vars(c) for c in e.diff] if e.diff is not None else None}) for e in page],
        next_after_seq=next_after,
    )
