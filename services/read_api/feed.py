"""The change feed: the log's events in order, for frontends that keep their own caches and for audits."""

from __future__ import annotations

import base64
import json
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query
from pydantic import BaseModel, Field

from services.log import LogError
from services.read_api.errors import ErrorBody
from services.read_api.sequences import Seq
from services.read_api.state import Api

router = APIRouter(tags=["change feed"])


class FeedEvent(BaseModel):
    """One event as the log stores it: where, when, its hash, and its JSON exactly as published."""

    seq: int
    subject: str
    stored_at: datetime
    hash: str = Field(description="SHA-256 of the stored bytes: the next event of the claim records it as prev_hash.")
    event: dict[str, Any] | None = Field(description="The event's JSON; null when the stored bytes are not JSON.")
    raw: str | None = Field(default=None, description="The stored bytes, base64, when they are not JSON.")


class Feed(BaseModel):
    """A page of the feed; ask again with ``after=next_after`` (the same value means: nothing newer yet)."""

    events: list[FeedEvent]
    next_after: int


@router.get("/events", response_model=Feed, responses={503: {"model": ErrorBody}})
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
    except LogError as error:
        raise HTTPException(503, detail={"error": "log_unavailable", "message": str(error)}) from None
    events = []
    for item in stored:
        try:
            event, raw = json.loads(item.data), None
        except (ValueError, UnicodeDecodeError):
            event, raw = None, base64.b64encode(item.data).decode()
        events.append(FeedEvent(seq=item.seq, subject=item.subject, stored_at=item.stored_at, hash=item.hash, event=event, raw=raw))
    return Feed(events=events, next_after=stored[-1].seq if stored else after)
