"""The per-actor token bucket, on a clock the test turns."""

from __future__ import annotations

from services.identity.rate_limit import RateLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_a_burst_is_allowed_then_writes_come_back_at_the_rate_per_actor():
    clock = Clock()
    limiter = RateLimiter(per_minute=30, burst=2, clock=clock)  # one write every 2 s
    assert await limiter.take("ada") is None and await limiter.take("ada") is None
    throttled = await limiter.take("ada")
    assert throttled is not None and throttled.retry_after == 2
    assert await limiter.take("grace") is None  # another actor has its own bucket
    clock.now += 1.0
    assert (await limiter.take("ada")).retry_after == 1  # half a write earned, and the refused one spent nothing
    clock.now += 1.0
    assert await limiter.take("ada") is None
    assert await limiter.take("ada") is not None
    clock.now += 3600
    first, second, third = [await limiter.take("ada") for _ in range(3)]
    assert first is None and second is None and third is not None  # the bucket holds at most the burst
