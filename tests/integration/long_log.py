"""A log long enough to span several restore batches, each claim's history spread over all of them."""

from __future__ import annotations

import asyncio

from services.log import ClaimLog
from tests.builders import attached, drafted
from tests.conftest import random_claim_id


async def write_interleaved(claim_log: ClaimLog, *, claims: int = 200, rounds: int = 12) -> int:
    """``claims`` claims appended one event each in turn for ``rounds`` rounds; returns the head."""
    ids = [random_claim_id() for _ in range(claims)]
    heads: dict[str, tuple[int, str | None]] = {claim: (0, None) for claim in ids}
    for turn in range(rounds):
        done = await asyncio.gather(*(
            claim_log.append(claim, [drafted(claim) if turn == 0 else attached(claim, f"s{turn}")],
                             expected_seq=heads[claim][0], prev_hash=heads[claim][1])
            for claim in ids
        ))
        heads = {claim: (appended.last_seq, appended.last_hash) for claim, appended in zip(ids, done, strict=True)}
    return await claim_log.head()
