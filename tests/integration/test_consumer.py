"""The projector's pull consumer: it takes what is there and keeps one pull request open while idle."""

from __future__ import annotations

import pytest

from services.log import ClaimLog, LogError
from tests.builders import attached, drafted


async def test_an_idle_consumer_keeps_a_single_pull_request_open(claim_log: ClaimLog, claim_id: str):
    consumer = claim_log.consumer("idle", max_batch=100)
    await consumer.start(0)
    for _ in range(20):
        assert await consumer.next_batch(timeout=0.02) == []
    info = await claim_log.nc.jetstream().consumer_info("CLAIMS", "idle")
    assert info.num_waiting == 1
    await claim_log.append(claim_id, [drafted(claim_id), attached(claim_id)], expected_seq=0, prev_hash=None)
    delivered = []
    while len(delivered) < 2:
        delivered += await consumer.next_batch(timeout=5)
    assert [d.seq for d in delivered] == [1, 2]
    await consumer.stop()


async def test_a_consumer_starts_after_the_checkpoint_it_is_given(claim_log: ClaimLog, claim_id: str):
    await claim_log.append(claim_id, [drafted(claim_id), attached(claim_id, "a"), attached(claim_id, "b")], expected_seq=0, prev_hash=None)
    consumer = claim_log.consumer("resume", max_batch=100)
    await consumer.start(2)
    assert [d.seq for d in await consumer.next_batch(timeout=5)] == [3]
    await consumer.stop()


async def test_a_consumer_whose_first_deliveries_went_to_another_client_refuses_what_follows(claim_log: ClaimLog, claim_id: str):
    # Another client pulling from the same durable consumer (a runner that has not stopped yet) takes
    # the first delivery: acknowledging the rest would pass over an event this consumer never saw.
    await claim_log.append(claim_id, [drafted(claim_id), attached(claim_id, "a"), attached(claim_id, "b")], expected_seq=0, prev_hash=None)
    consumer = claim_log.consumer("taken", max_batch=100)
    await consumer.start(0)
    inbox = await claim_log.nc.subscribe(claim_log.nc.new_inbox())
    await claim_log.nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{claim_log.stream}.taken", b'{"batch": 1}', reply=inbox.subject)
    stolen = await inbox.next_msg(timeout=5)
    assert stolen.metadata.sequence.consumer == 1
    with pytest.raises(LogError, match="skipped 1 deliveries"):
        await consumer.next_batch(timeout=5)
    await consumer.stop()
