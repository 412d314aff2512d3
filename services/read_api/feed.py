"""The change feed: the log's events in order, for frontends that keep their own caches and for audits."""

from __future__ import annotations

import base64
import json
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query
from pydantic import BaseModel, Field

from services.admission import Refused, gate_for
from services.log import LogError
from services.read_api.api_state import Api
from services.read_api.sequences import Seq

router = APIRouter(tags=["change feed"])


class FeedEvent(BaseModel):
    """One event as the log stores it: where, when, its hash, and its JSON exactly as published."""

    seq: int
    subject: str
    stored_at: datetime
    hash: str = Field(description="SHA-256 of the stored bytes: the next event of the claim records it as prev_hash.")
    event: dict[str, Any] | None = Field(description="The event's JSON; null when the stored bytes are not JSON.")
    raw: str | None = Field(default=None, description="The stored bytes, base64, when they are not JSON.")
    refused: str | None = Field(
        default=None,
        description="Why the log's gate refuses the message (its bytes, store time, subject or signature), so that no reader folds it; "
        "null when admitted on its own (whether it repeats an event id its actor admitted on its claim before, the claim's history says).",
    )


class Feed(BaseModel):
    """A page of the feed; ask again with ``after=next_after`` (the same value means: nothing newer yet)."""

    events: list[FeedEvent]
    next_after: int


@router.get("/events", response_model=Feed)
async def change_feed(
    api: Api,
    after: Annotated[Seq, Query(description="Events after this log sequence.")] = 0,
    limit: int = Query(100, ge=1, le=1000),
) -> Feed:
    """The log's events after ``after``, in log order, read from the log itself (not the read models)."""
    claim_log = api.claim_log
    if claim_log is None:
        raise HTTPException(503, detail={"error": "not_connected", "message": "this API process has no connection to the log"})
    try:
        stored = await claim_log.read_log(after_seq=after, limit=limit)
        gate = await gate_for(claim_log, (item.signature for item in stored))
    except LogError as error:
        raise HTTPException(503, detail={"error": "log_unavailable", "message": str(error)}) from None
    events = []
    for item in stored:
        try:
            event, raw = json.loads(item.data), None
        except (ValueError, UnicodeDecodeError):
            event, raw = None, base64.b64encode(item.data).decode()
        verdict = gate.stored(item)
        refused = verdict.reason if isinstance(verdict, Refused) else None
        events.append(FeedEvent(seq=item.seq, subject=item.subject, stored_at=item.stored_at, hash=item.hash, event=event, raw=raw, refused=refused))
    return Feed(events=events, next_after=stored[-1].seq if stored else after)
