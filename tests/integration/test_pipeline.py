"""Pipelined appends: many claims in flight, each append still atomic, checked and deduplicated."""

from __future__ import annotations

import asyncio

import pytest

from services.log import ClaimLog, ConflictError, PublishError, StreamSpec, connect
from tests.builders import attached, drafted, history
from tests.conftest import random_claim_id


async def test_pipelined_appends_across_claims_are_all_acknowledged_and_stored(claim_log: ClaimLog):
    claims = [random_claim_id() for _ in range(300)]
    async with claim_log.pipeline(window=64) as pipeline:
        futures = [await pipeline.submit(c, history(c), expected_seq=0, prev_hash=None) for c in claims]
    results = [f.result() for f in futures]
    assert not any(r.duplicate for r in results)
    assert sorted(r.last_seq for r in results) == [14 * (i + 1) for i in range(300)]
    stored = await claim_log.read_claim(claims[17])
    assert [s.seq for s in stored] == list(range(results[17].first_seq, results[17].last_seq + 1))


async def test_a_pipelined_conflict_fails_only_its_own_append(claim_log: ClaimLog):
    taken, free = random_claim_id(), random_claim_id()
    await claim_log.append(taken, [drafted(taken)], expected_seq=0, prev_hash=None)
    async with claim_log.pipeline() as pipeline:
        stale = await pipeline.submit(taken, [attached(taken, "late")], expected_seq=0, prev_hash=None)
        fine = await pipeline.submit(free, [drafted(free)], expected_seq=0, prev_hash=None)
    with pytest.raises(ConflictError):
        stale.result()
    assert fine.result().last_seq > 0


async def test_a_pipelined_retry_is_recognised_as_a_duplicate(claim_log: ClaimLog):
    claim_id = random_claim_id()
    events = history(claim_id)
    async with claim_log.pipeline() as pipeline:
        first = await pipeline.submit(claim_id, events, expected_seq=0, prev_hash=None)
    async with claim_log.pipeline() as pipeline:
        again = await pipeline.submit(claim_id, events, expected_seq=0, prev_hash=None)
    assert again.result().duplicate
    assert again.result().last_seq == first.result().last_seq
    assert len(await claim_log.read_claim(claim_id)) == len(events)


async def test_with_a_window_of_one_each_append_waits_for_the_last_acknowledgement(claim_log: ClaimLog):
    claims = [random_claim_id() for _ in range(20)]
    async with claim_log.pipeline(window=1) as pipeline:
        futures = []
        for claim_id in claims:
            futures.append(await pipeline.submit(claim_id, [drafted(claim_id)], expected_seq=0, prev_hash=None))
            assert all(f.done() for f in futures[:-1])  # the slot came back only with the previous acknowledgement
    assert [f.result().last_seq for f in futures] == sorted(f.result().last_seq for f in futures)


async def test_an_append_no_stream_stores_fails_at_once_with_why(nats_url: str):
    nc = await connect(nats_url)  # no stream created on this server
    try:
        claim_id = random_claim_id()
        async with ClaimLog(nc, StreamSpec("CLAIMS")).pipeline() as pipeline:
            future = await pipeline.submit(claim_id, [drafted(claim_id)], expected_seq=0, prev_hash=None)
            with pytest.raises(PublishError, match=f"the append to {claim_id} was not stored: no stream stores its subject"):
                await asyncio.wait_for(future, 10)  # before: the future was never resolved
    finally:
        await nc.close()


async def test_a_single_append_no_stream_stores_says_the_stream_is_missing_not_an_election(nats_url: str):
    nc = await connect(nats_url)  # no stream created on this server: asked why, the server has none to name
    try:
        claim_id = random_claim_id()
        with pytest.raises(PublishError, match=r"^no stream stores claims\.\S+: is the claim stream created\?$"):
            await ClaimLog(nc, StreamSpec("CLAIMS")).append(claim_id, [drafted(claim_id)], expected_seq=0, prev_hash=None)
    finally:
        await nc.close()
