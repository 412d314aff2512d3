"""The API process's one subscription to commit notices, and the live streams open on it (``live_streams.py``
serves them).

A claim stream keeps only the newest sequence of its claim it has not sent. The registry streams share one
feed (``RegistryFeed``): every notice is merged into it once, whatever the number of streams, and every
``REGISTRY_EVERY`` seconds (while something changed) it becomes one message, encoded once and sent to every
registry stream; a stream that fell more than ``KEPT`` messages behind is told to reload. So a notice costs
the same with one registry stream open as with a thousand, and each stream sends at most one message a
``REGISTRY_EVERY``: 500 streams that each woke and sent at every commit starved the writers of the process.

Open streams are capped per client address (429 past it: that client holds too many) and per process (503
past it: this process holds as many as it sustains; another process, or later, may serve it), both with
``Retry-After``.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter, deque
from dataclasses import dataclass, field

from fastapi import HTTPException
from nats.aio.msg import Msg

from services.log import ClaimLog
from services.log.names import notice_subject
from services.projector.notices import decode_notice

COALESCE_LIMIT = 500  # changed claims one registry message holds before it says "reload" instead
REGISTRY_EVERY = 1.0  # seconds between two messages of the registry streams: what changed meanwhile is merged
KEPT = 8  # registry messages kept for streams still sending an earlier one
RETRY_AFTER = "5"


@dataclass(frozen=True)
class RegistryMessage:
    """One message of the registry streams: the claims changed (None: more than one message holds), through a sequence."""

    version: int
    claims: dict[str, int] | None
    through: int
    raw: str  # the message's data as JSON, encoded once for every stream


class RegistryFeed:
    """What the registry changed, merged from every notice and turned into one message every ``every`` seconds."""

    def __init__(self, every: float = REGISTRY_EVERY) -> None:
        self.every = every
        self.version = 0
        self.recent: deque[RegistryMessage] = deque(maxlen=KEPT)
        self._changed: dict[str, int] = {}
        self._through = 0
        self._due = False
        self._ready = asyncio.Event()

    def offer(self, claims: dict[str, int], through: int) -> None:
        if len(self._changed) <= COALESCE_LIMIT:
            self._changed.update(claims)
        self._through = max(self._through, through)
        if not self._due:
            self._due = True
            asyncio.get_running_loop().call_later(self.every, self._publish)

    def _publish(self) -> None:
        self._due = False
        changed, self._changed = self._changed, {}
        claims = None if len(changed) > COALESCE_LIMIT else changed
        data = {"reload": True, "through": self._through} if claims is None else {"claims": claims, "through": self._through}
        self.version += 1
        self.recent.append(RegistryMessage(self.version, claims, self._through, json.dumps(data, separators=(",", ":"))))
        ready, self._ready = self._ready, asyncio.Event()
        ready.set()

    async def wait(self, after: int) -> None:
        """Until a message newer than version ``after`` is there."""
        if self.version <= after:
            await self._ready.wait()

    def since(self, after: int) -> list[RegistryMessage] | None:
        """The messages after version ``after``; None when some of them are no longer kept (the stream reloads)."""
        newer = [message for message in self.recent if message.version > after]
        if newer and newer[0].version != after + 1:
            return None
        return newer


@dataclass(eq=False)
class Watcher:
    """One open stream: what it watches, and the newest change it has not sent yet."""

    claim_id: str | None  # None: the whole registry
    capability: str | None = None
    seq: int = 0  # the newest sequence to send (a claim stream)
    changed: dict[str, int] = field(default_factory=dict)  # a registry stream's catch-up on resuming
    through: int = 0
    version: int = 0  # the registry feed's last message this stream sent
    wake: asyncio.Event = field(default_factory=asyncio.Event)

    def offer(self, claims: dict[str, int], through: int) -> None:
        """Take in changes; the stream sends them when it next can, merged with any unsent."""
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

    def __init__(self, *, max_streams: int, max_per_client: int, registry_every: float = REGISTRY_EVERY) -> None:
        self.max_streams, self.max_per_client = max_streams, max_per_client
        self.registry = RegistryFeed(registry_every)
        self._by_claim: dict[str, set[Watcher]] = {}
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
        self.registry.offer(notice.claims, notice.through)

    def open(self, client: str, watcher: Watcher) -> None:
        """Count the stream against its client's limit (429 past it) and the process's (503 past it)."""
        if self.open_streams >= self.max_streams:
            message = f"this API process keeps {self.max_streams} live streams open at most; retry later, or reach another process"
            raise HTTPException(503, detail={"error": "too_many_streams", "message": message}, headers={"Retry-After": RETRY_AFTER})
        if self._clients[client] >= self.max_per_client:
            message = f"one client address may keep {self.max_per_client} live streams open on this process; close one, or retry later"
            raise HTTPException(429, detail={"error": "too_many_streams", "message": message}, headers={"Retry-After": RETRY_AFTER})
        self._clients[client] += 1
        if watcher.claim_id is None:
            watcher.version = self.registry.version  # it hears what changes from now on
        else:
            self._by_claim.setdefault(watcher.claim_id, set()).add(watcher)

    def close(self, client: str, watcher: Watcher) -> None:
        self._clients[client] -= 1
        if self._clients[client] <= 0:
            del self._clients[client]
        if watcher.claim_id is not None:
            watchers = self._by_claim.get(watcher.claim_id, set())
            watchers.discard(watcher)
            if not watchers:
                self._by_claim.pop(watcher.claim_id, None)
