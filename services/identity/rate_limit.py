"""Writes per actor, limited by a token bucket: a steady rate a minute and a burst on top.

The buckets are shared by every API process of a registry: they live in a JetStream key-value bucket
beside the log (``claimlog_rates``, services/log/shared_state.py), one key per actor, changed
by compare-and-set (``update`` at the revision read), so two processes spending one actor's last
write cannot both have it. Behind n API processes an actor still gets the limit once, not n times.
Actors are authenticated before they reach a bucket, so there is at most one bucket per actor with
a token, never one per caller that made something up. A process of its own (tests, one-off tools)
may keep the buckets in memory instead (``MemoryBuckets``).

The time is the wall clock (``time.time``): it is the one clock processes on several machines share.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError, NotFoundError

from services.log.shared_state import LazyBucket

log = logging.getLogger(__name__)
# Attempts at a compare-and-set before a write is refused as contended (another process kept
# spending the same actor's allowance at the same moment).
ATTEMPTS = 8


@dataclass(frozen=True)
class Throttled:
    """Why a write was refused, and how many whole seconds until one is allowed again."""

    retry_after: int
    message: str


class Buckets(Protocol):
    """Where each actor's (tokens, when counted) is kept, with a version for compare-and-set."""

    async def read(self, actor_id: str) -> tuple[tuple[float, float] | None, int | None]: ...

    async def write(self, actor_id: str, value: tuple[float, float], version: int | None) -> bool:
        """Store ``value`` if the actor's bucket is still at ``version`` (None: absent); False if not."""


class MemoryBuckets:
    """Buckets in this process's memory (one process only)."""

    def __init__(self) -> None:
        self._values: dict[str, tuple[float, float]] = {}

    async def read(self, actor_id: str) -> tuple[tuple[float, float] | None, int | None]:
        return self._values.get(actor_id), None

    async def write(self, actor_id: str, value: tuple[float, float], version: int | None) -> bool:
        self._values[actor_id] = value
        return True


class SharedBuckets:
    """Buckets in a key-value bucket every API process of the registry reads and writes."""

    def __init__(self, bucket: LazyBucket) -> None:
        self._bucket = bucket

    async def read(self, actor_id: str) -> tuple[tuple[float, float] | None, int | None]:
        kv = await self._bucket()
        try:
            entry = await kv.get(_key(actor_id))
        except (KeyNotFoundError, NotFoundError):
            return None, None
        try:
            return _record(entry.value), entry.revision
        except ValueError as error:  # written around claimlog (the writer credential may): counted afresh, over it
            log.warning("rates bucket %s: the record of key %s is malformed (%s): the actor's allowance is counted afresh",
                        self._bucket.name, _key(actor_id), error)
            return None, entry.revision

    async def write(self, actor_id: str, value: tuple[float, float], version: int | None) -> bool:
        kv = await self._bucket()
        data = json.dumps({"tokens": value[0], "at": value[1]}).encode()
        try:
            if version is None:
                await kv.create(_key(actor_id), data)
            else:
                await kv.update(_key(actor_id), data, last=version)
        except KeyWrongLastSequenceError:
            return False
        return True


def _record(data: bytes | None) -> tuple[float, float]:
    """(tokens, when counted) of a stored record; ``ValueError`` saying why when it is not one claimlog writes."""
    try:
        value = json.loads(data or b"")
    except (ValueError, UnicodeDecodeError) as error:
        raise ValueError(f"not JSON: {error}") from None
    if not isinstance(value, dict):
        raise ValueError("not a JSON object")
    numbers = [value.get(name) for name in ("tokens", "at")]
    if not all(isinstance(n, int | float) and not isinstance(n, bool) and math.isfinite(n) for n in numbers):
        raise ValueError(f"tokens and at must be finite numbers, got {numbers[0]!r} and {numbers[1]!r}")
    return float(numbers[0]), float(numbers[1])


def _key(actor_id: str) -> str:
    """An actor's key: actor ids may hold characters a key may not, so their hash."""
    return "actor." + hashlib.sha256(actor_id.encode()).hexdigest()[:40]


class RateLimiter:
    """One token bucket per actor id: ``burst`` writes at once, refilled at ``per_minute`` a minute."""

    def __init__(
        self, *, per_minute: float, burst: int, clock: Callable[[], float] = time.time, buckets: Buckets | None = None
    ) -> None:
        self.per_minute, self.burst = per_minute, burst
        self._per_second = per_minute / 60.0
        self._clock = clock
        self._buckets = buckets if buckets is not None else MemoryBuckets()

    async def take(self, actor_id: str) -> Throttled | None:
        """Spend one write of the actor's allowance; a ``Throttled`` when none is left (nothing spent)."""
        for _ in range(ATTEMPTS):
            now = self._clock()
            stored, version = await self._buckets.read(actor_id)
            tokens, then = stored if stored is not None else (float(self.burst), now)
            # A record claimlog did not write (the bucket is the writers' to share) counts as at most a full
            # bucket, at least an empty one counted now: the wait is never longer than one refill of a write.
            tokens, then = min(max(tokens, 0.0), float(self.burst)), min(then, now)
            tokens = min(float(self.burst), tokens + (now - then) * self._per_second)
            if tokens < 1.0:  # refused: nothing is written, so the next look counts from the same point
                wait = max(1, math.ceil((1.0 - tokens) / self._per_second))
                return Throttled(
                    wait,
                    f"actor {actor_id!r} sent more than {self.per_minute:g} writes a minute (burst {self.burst}); "
                    f"retry in {wait}s",
                )
            if await self._buckets.write(actor_id, (tokens - 1.0, now), version):
                return None
        return Throttled(1, f"actor {actor_id!r} is sending many writes at once from several places; retry in 1s")
