"""Writes per actor, limited by a token bucket: a steady rate a minute and a burst on top.

The buckets live in the memory of one API process: behind several API processes an actor gets the
limit once per process. Actors are authenticated before they reach a bucket, so there is at most one
bucket per actor with a token, never one per caller that made something up.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Throttled:
    """Why a write was refused, and how many whole seconds until one is allowed again."""

    retry_after: int
    message: str


class RateLimiter:
    """One token bucket per actor id: ``burst`` writes at once, refilled at ``per_minute`` a minute."""

    def __init__(self, *, per_minute: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_minute, self.burst = per_minute, burst
        self._per_second = per_minute / 60.0
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # actor id -> (tokens, when counted)

    def take(self, actor_id: str) -> Throttled | None:
        """Spend one write of the actor's allowance; a ``Throttled`` when none is left (nothing spent)."""
        now = self._clock()
        tokens, then = self._buckets.get(actor_id, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - then) * self._per_second)
        if tokens >= 1.0:
            self._buckets[actor_id] = (tokens - 1.0, now)
            return None
        self._buckets[actor_id] = (tokens, now)
        wait = max(1, math.ceil((1.0 - tokens) / self._per_second))
        return Throttled(
            wait,
            f"actor {actor_id!r} sent more than {self.per_minute:g} writes a minute (burst {self.burst}); "
            f"retry in {wait}s",
        )
