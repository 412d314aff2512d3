"""Live pages: Server-Sent Events that say when a claim, or the registry, has changed.

The projector that commits a batch sends a notice (``services/projector/notices.py``); every API process
subscribes once and hands each open stream the latest sequence of what it watches. A stream holds no
queue: a claim stream keeps only the newest change it has not sent, so a slow client costs the same memory
as a fast one, and a burst of commits reaches it as one message. The registry streams share one feed
(``live_hub.RegistryFeed``) that merges every commit once and makes one message every ``REGISTRY_EVERY``
seconds, the changed claims up to ``COALESCE_LIMIT`` (past which it asks the client to reload): their
clients want the registry's state, not each step. A message is sent
only after the commit it names, so a read with ``?after=`` its sequence shows the change. A client that
reconnects with ``Last-Event-ID`` gets what changed since then from the read models first.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable
from typing import Annotated

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.sse import EventSourceResponse, ServerSentEvent
from sqlalchemy import Engine, select

from events.envelope import ClaimId
from projections.tables import claim_pages
from services.read_api.api_state import api_state
from services.read_api.as_of import connected_log
from services.read_api.live_hub import COALESCE_LIMIT, LiveHub, RegistryFeed, Watcher
from services.read_api.sequences import Seq

router = APIRouter(tags=["live"])
RETRY_MS = 2000  # how long a browser waits before it reconnects
DISCONNECT_CHECK = 5.0  # seconds between looks at whether an idle stream's client has gone (its place is then freed)


def hub_of(request: Request) -> LiveHub:
    return api_state(request.app).live


LIMITED: dict[int | str, dict] = {
    429: {"description": "This client address keeps too many live streams open (Retry-After)."},
    503: {"description": "This API process keeps as many live streams open as it sustains (Retry-After)."},
}
LastEventId = Annotated[str | None, Header(description="Resume: the id of the last message received.")]


async def claim_watcher(request: Request, claim_id: ClaimId) -> Watcher:
    """The stream's place, taken before the answer starts (so a limit is a 429, not a broken stream)."""
    return _opened(request, Watcher(claim_id))


async def registry_watcher(
    request: Request,
    capability: Annotated[str | None, Query(max_length=500, description="Only claims of this capability.")] = None,
) -> Watcher:
    return _opened(request, Watcher(None, capability=capability))


def _opened(request: Request, watcher: Watcher) -> Watcher:
    hub_of(request).open(_client(request), watcher)
    return watcher


def _client(request: Request) -> str:
    return request.client.host if request.client else "unknown"


@router.get("/claims/{claim_id}/live", response_class=EventSourceResponse, responses=LIMITED)
async def claim_live(
    request: Request, watcher: Annotated[Watcher, Depends(claim_watcher)], last_event_id: LastEventId = None
) -> AsyncIterable[ServerSentEvent]:
    """Server-Sent Events: one ``changed`` message each time the claim's page changes, with its data
    ``{"claim_id", "seq"}``, sent after the commit (read the page with ``?after=seq``). Its ``id`` is the
    sequence: reconnect with ``Last-Event-ID`` to hear of a change made meanwhile. A burst of changes may
    arrive as one message, with the newest sequence."""
    async for message in _stream(request, watcher, _resume_from(last_event_id)):
        yield message


@router.get("/live", response_class=EventSourceResponse, responses=LIMITED)
async def registry_live(
    request: Request, watcher: Annotated[Watcher, Depends(registry_watcher)], last_event_id: LastEventId = None
) -> AsyncIterable[ServerSentEvent]:
    """Server-Sent Events for the whole registry (or one capability): ``changed`` messages with data
    ``{"claims": {claim_id: seq}, "through": seq}``, the claims changed since the last message (bursts are
    merged into one), or ``{"reload": true, "through": seq}`` when more changed than one message holds.
    Its ``id`` is ``through``: reconnect with ``Last-Event-ID`` to hear of what changed meanwhile."""
    async for message in _stream(request, watcher, _resume_from(last_event_id)):
        yield message


def _resume_from(last_event_id: str | None) -> int | None:
    if last_event_id is None or not last_event_id.strip().isdigit() or len(last_event_id.strip()) > 19:
        return None
    return int(last_event_id.strip())


async def _stream(request: Request, watcher: Watcher, resume: int | None) -> AsyncIterable[ServerSentEvent]:
    hub = hub_of(request)
    try:
        await hub.start(connected_log(request))
        yield ServerSentEvent(comment="claimlog live", retry=RETRY_MS)
        if resume is not None:  # subscribed first: nothing can fall between the catch-up and the notices
            claims, through = await asyncio.to_thread(_changed_since, api_state(request.app).reads.engine, watcher, resume)
            watcher.offer(claims, through)
        while not await request.is_disconnected():
            try:
                async with asyncio.timeout(DISCONNECT_CHECK):  # no task per wait, as wait_for makes on Python 3.11
                    await (watcher.wake.wait() if watcher.claim_id is not None or watcher.changed else hub.registry.wait(watcher.version))
            except TimeoutError:
                continue  # FastAPI sends keep-alive comments itself; this only checks for a disconnect
            if watcher.claim_id is None and not watcher.changed:
                message = await _from_feed(api_state(request.app).reads.engine, hub.registry, watcher)
            else:
                message = await _take(api_state(request.app).reads.engine, watcher)
            if message is not None:
                yield message
    finally:
        hub.close(_client(request), watcher)


async def _from_feed(engine: Engine, feed: RegistryFeed, watcher: Watcher) -> ServerSentEvent | None:
    """The registry feed's messages this stream has not sent, as one (the same bytes every stream sends, when it can)."""
    messages = feed.since(watcher.version)
    watcher.version = feed.version
    if not messages:
        return None
    through = messages[-1].through
    if len(messages) == 1 and watcher.capability is None:
        return ServerSentEvent(event="changed", id=str(through), raw_data=messages[0].raw)
    changed: dict[str, int] = {}
    for message in messages:
        if message.claims is None:
            break
        changed.update(message.claims)
    else:
        if len(changed) <= COALESCE_LIMIT:
            return await _registry_message(engine, watcher.capability, changed, through)
    return ServerSentEvent(event="changed", id=str(through), data={"reload": True, "through": through})


async def _registry_message(engine: Engine, capability: str | None, changed: dict[str, int], through: int) -> ServerSentEvent | None:
    if capability is not None:
        changed = await asyncio.to_thread(_of_capability, engine, changed, capability)
        if not changed:
            return None
    return ServerSentEvent(event="changed", id=str(through), data={"claims": changed, "through": through})


async def _take(engine: Engine, watcher: Watcher) -> ServerSentEvent | None:
    """The message for what the watcher holds unsent (a claim's newest sequence, a registry stream's catch-up), emptying it."""
    watcher.wake.clear()
    if watcher.claim_id is not None:
        return ServerSentEvent(event="changed", id=str(watcher.seq), data={"claim_id": watcher.claim_id, "seq": watcher.seq})
    changed, through = watcher.changed, watcher.through
    watcher.changed = {}
    if len(changed) > COALESCE_LIMIT:
        return ServerSentEvent(event="changed", id=str(through), data={"reload": True, "through": through})
    return await _registry_message(engine, watcher.capability, changed, through)


def _of_capability(engine: Engine, changed: dict[str, int], capability: str) -> dict[str, int]:
    query = select(claim_pages.c.claim_id).where(
        claim_pages.c.claim_id.in_(list(changed)), claim_pages.c.capability == capability
    )
    with engine.connect() as conn:
        return {claim_id: changed[claim_id] for claim_id in conn.execute(query).scalars()}


def _changed_since(engine: Engine, watcher: Watcher, since: Seq) -> tuple[dict[str, int], int]:
    """What the read models changed after ``since``: the claim's last sequence, or the registry's claims."""
    query = select(claim_pages.c.claim_id, claim_pages.c.last_seq).where(claim_pages.c.last_seq > since)
    if watcher.claim_id is not None:
        query = query.where(claim_pages.c.claim_id == watcher.claim_id)
    with engine.connect() as conn:
        rows = conn.execute(query.order_by(claim_pages.c.last_seq).limit(COALESCE_LIMIT + 1)).all()
    claims = {claim_id: seq for claim_id, seq in rows}
    return claims, max(claims.values(), default=since)
