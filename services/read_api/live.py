"""Live pages: Server-Sent Events that say when a claim, or the registry, has changed.

The projector that commits a batch sends a notice (``services/projector/notices.py``); every API process
subscribes once and hands each open stream the latest sequence of what it watches. A stream holds no
queue: each keeps only the newest change it has not sent (one sequence for a claim; for the registry,
the changed claims, up to ``COALESCE_LIMIT``, past which it asks the client to reload), so a slow client
costs the same memory as a fast one, and a burst of commits reaches it as one message. A registry stream
sends at most one message every ``REGISTRY_EVERY`` seconds, merging what changed meanwhile: it hears of
every commit in the registry, and its clients want the registry's state, not each step. A message is sent
only after the commit it names, so a read with ``?after=`` its sequence shows the change. A client that
reconnects with ``Last-Event-ID`` gets what changed since then from the read models first.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterable
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import APIRouter, Depends, Header, HTTPException, Query, Request
from fastapi.sse import EventSourceResponse, ServerSentEvent
from nats.aio.msg import Msg
from sqlalchemy import Engine, select

from events.envelope import ClaimId
from projections.tables import claim_pages
from services.log import ClaimLog
from services.projector.notices import decode_notice, notice_subject
from services.read_api.as_of import connected_log
from services.read_api.sequences import Seq

router = APIRouter(tags=["live"])
COALESCE_LIMIT = 500  # changed claims a registry stream holds before it says "reload" instead
RETRY_MS = 2000  # how long a browser waits before it reconnects
REGISTRY_EVERY = 0.1  # seconds between two messages of a registry stream: what changed meanwhile is merged
DISCONNECT_CHECK = 2.0  # seconds between looks at whether an idle stream's client has gone (its place is then freed)


@dataclass(eq=False)
class Watcher:
    """One open stream: what it watches, and the newest change it has not sent yet."""

    claim_id: str | None  # None: the whole registry
    capability: str | None = None
    seq: int = 0  # the newest sequence to send (a claim stream)
    changed: dict[str, int] = field(default_factory=dict)  # claim -> sequence (a registry stream)
    through: int = 0
    wake: asyncio.Event = field(default_factory=asyncio.Event)

    def offer(self, claims: dict[str, int], through: int) -> None:
        """Take in a commit's changes; the stream sends them when it next can, merged with any unsent."""
        if self.claim_id is not None:
            seq = claims.get(self.claim_id)
            if seq is None or seq <= self.seq:
                return
            self.seq = seq
        else:
            if len(self.changed) <= COALESCE_LIMIT:
                self.changed.update(claims)
            self.through = max(self.through, through)
        self.wake.set()


class LiveHub:
    """The API process's one subscription to commit notices, and the streams open on it."""

    def __init__(self, *, max_streams: int, max_per_client: int) -> None:
        self.max_streams, self.max_per_client = max_streams, max_per_client
        self._by_claim: dict[str, set[Watcher]] = {}
        self._registry: set[Watcher] = set()
        self._clients: Counter[str] = Counter()
        self._started = False
        self._lock = asyncio.Lock()

    @property
    def open_streams(self) -> int:
        return sum(self._clients.values())

    async def start(self, claim_log: ClaimLog) -> None:
        """Subscribe to the commit notices of the log's stream, once per process."""
        async with self._lock:
            if not self._started:
                await claim_log.nc.subscribe(notice_subject(claim_log.stream), cb=self._heard)
                self._started = True

    async def _heard(self, msg: Msg) -> None:
        notice = decode_notice(msg.data)
        if notice is None:
            return
        for claim_id in notice.claims:
            for watcher in self._by_claim.get(claim_id, ()):
                watcher.offer(notice.claims, notice.through)
        for watcher in self._registry:
            watcher.offer(notice.claims, notice.through)

    def open(self, client: str, watcher: Watcher) -> None:
        """Count the stream against its client's and the process's limits (429 past either)."""
        if self.open_streams >= self.max_streams or self._clients[client] >= self.max_per_client:
            limit = "this API process's" if self.open_streams >= self.max_streams else "one client's"
            message = f"{limit} limit of open live streams is reached; close one, or retry later"
            raise HTTPException(429, detail={"error": "too_many_streams", "message": message}, headers={"Retry-After": "5"})
        self._clients[client] += 1
        if watcher.claim_id is None:
            self._registry.add(watcher)
        else:
            self._by_claim.setdefault(watcher.claim_id, set()).add(watcher)

    def close(self, client: str, watcher: Watcher) -> None:
        self._clients[client] -= 1
        if self._clients[client] <= 0:
            del self._clients[client]
        if watcher.claim_id is None:
            self._registry.discard(watcher)
        else:
            watchers = self._by_claim.get(watcher.claim_id, set())
            watchers.discard(watcher)
            if not watchers:
                self._by_claim.pop(watcher.claim_id, None)


def hub_of(request: Request) -> LiveHub:
    return request.app.state.live


LIMITED: dict[int | str, dict] = {429: {"description": "Too many live streams open (for this client, or this process)."}}
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
            claims, through = await asyncio.to_thread(_changed_since, request.app.state.engine, watcher, resume)
            watcher.offer(claims, through)
        while not await request.is_disconnected():
            try:
                async with asyncio.timeout(DISCONNECT_CHECK):  # no task per wait, as wait_for makes on Python 3.11
                    await watcher.wake.wait()
            except TimeoutError:
                continue  # FastAPI sends keep-alive comments itself; this only checks for a disconnect
            message = await _take(request.app.state.engine, watcher)
            if message is not None:
                yield message
                if watcher.claim_id is None:
                    await asyncio.sleep(REGISTRY_EVERY)  # a burst of commits becomes one message
    finally:
        hub.close(_client(request), watcher)


async def _take(engine: Engine, watcher: Watcher) -> ServerSentEvent | None:
    """The message for what the watcher holds unsent, emptying it."""
    watcher.wake.clear()
    if watcher.claim_id is not None:
        return ServerSentEvent(event="changed", id=str(watcher.seq), data={"claim_id": watcher.claim_id, "seq": watcher.seq})
    changed, through = watcher.changed, watcher.through
    watcher.changed = {}
    if len(changed) > COALESCE_LIMIT:
        return ServerSentEvent(event="changed", id=str(through), data={"reload": True, "through": through})
    if watcher.capability is not None:
        changed = await asyncio.to_thread(_of_capability, engine, changed, watcher.capability)
        if not changed:
            return None
    return ServerSentEvent(event="changed", id=str(through), data={"claims": changed, "through": through})


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
