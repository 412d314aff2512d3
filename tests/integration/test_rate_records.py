"""The shared rate limit's records are the writers' to share, so a record claimlog did not write (not JSON,
fields missing, numbers that are not finite, far outside a bucket's range) is counted afresh over, and a
``Retry-After`` never says more than the wait for one write."""

from __future__ import annotations

import json

import pytest

from services.identity.rate_limit import RateLimiter, SharedBuckets, _key
from services.log import ClaimLog
from services.log.names import RATES
from services.log.shared_state import LazyBucket


@pytest.mark.parametrize("record", [b"junk", b"[1, 2]", b'{"tokens": 1}', b'{"tokens": "NaN", "at": 1}', b'{"tokens": true, "at": 1}'])
async def test_a_malformed_record_is_counted_afresh_and_written_over(claim_log: ClaimLog, record: bytes):
    bucket = LazyBucket(claim_log.nc, RATES, stream=claim_log.stream)
    await (await bucket()).put(_key("ada"), record)
    limiter = RateLimiter(per_minute=60, burst=5, clock=lambda: 1000.0, buckets=SharedBuckets(bucket))
    assert await limiter.take("ada") is None
    stored = json.loads((await (await bucket()).get(_key("ada"))).value)
    assert stored == {"tokens": 4.0, "at": 1000.0}


async def test_extreme_numbers_give_a_bounded_retry_after(claim_log: ClaimLog):
    bucket = LazyBucket(claim_log.nc, RATES, stream=claim_log.stream)
    await (await bucket()).put(_key("ada"), b'{"tokens": -1e300, "at": 1e300}')
    limiter = RateLimiter(per_minute=60, burst=5, clock=lambda: 1000.0, buckets=SharedBuckets(bucket))
    throttled = await limiter.take("ada")
    assert throttled is not None and throttled.retry_after == 1  # one write's refill at 60 a minute
