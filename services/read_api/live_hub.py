"""The API process's one subscription to commit notices, and the live streams open on it (``live.py``
serves them): each stream keeps only the newest change it has not sent, up to ``COALESCE_LIMIT`` changed
claims for a registry stream."""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field

from fastapi import HTTPException
from nats.aio.msg import Msg

from services.log import ClaimLog
from services.log.names import notice_subject
from services.projector.notices import decode_notice

COALESCE_LIMIT = 500  # changed claims a registry stream holds before it says "reload" instead


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
