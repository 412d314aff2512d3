"""The partitioned log on a real nats-server: the server's partitions are claimlog's, and fixed when the stream is made."""

from __future__ import annotations

import pytest

from events.subjects import LogLayout
from services.log import ClaimLog, LogConfigError, StreamSpec, connect
from tests.builders import attached, drafted
from tests.conftest import random_claim_id


@pytest.mark.parametrize("partitions", [16, 7])
async def test_the_server_stores_each_claim_in_the_partition_claimlog_computes(nats_url: str, partitions: int):
    layout = LogLayout("claims", partitions)
    nc = await connect(nats_url)
    try:
        claim_log = ClaimLog(nc, StreamSpec("CLAIMS", layout=layout))
        await claim_log.ensure()
        js = nc.jetstream()
        claims = [random_claim_id() for _ in range(400)]
        for claim in claims:
            await js.publish(layout.publish_subject(claim, "ClaimDrafted"), b"{}", stream="CLAIMS")
        stored = await claim_log.read_log(after_seq=0, limit=1000)
        assert [s.subject for s in stored] == [layout.stored_subject(c, "ClaimDrafted") for c in claims]
        assert len({layout.partition_of(c) for c in claims}) == partitions
    finally:
        await nc.close()


async def test_one_partitions_filter_reads_exactly_the_claims_of_that_partition(claim_log: ClaimLog):
    layout = claim_log.layout
    claims = [random_claim_id() for _ in range(40)]
    for claim in claims:
        await claim_log.append(claim, [drafted(claim), attached(claim, "s1")], expected_seq=0, prev_hash=None)
    wanted = layout.partition_of(claims[0])
    js = claim_log.nc.jetstream()
    sub = await js.pull_subscribe(layout.partition_filter(wanted), durable="one-partition", stream=claim_log.stream)
    messages = await sub.fetch(100, timeout=2)
    assert sorted({layout.claim_of(m.subject) for m in messages}) == sorted(c for c in claims if layout.partition_of(c) == wanted)


async def test_a_stream_made_with_other_partitions_is_refused_with_what_to_set(nats_url: str):
    nc = await connect(nats_url)
    try:
        await ClaimLog(nc, StreamSpec("CLAIMS", layout=LogLayout("claims", 8))).ensure()
        with pytest.raises(LogConfigError, match="in 8 partitions, but CLAIMLOG_PARTITIONS is 16.*CLAIMLOG_PARTITIONS=8"):
            await ClaimLog(nc, StreamSpec("CLAIMS", layout=LogLayout("claims", 16))).ensure()
        await ClaimLog(nc, StreamSpec("CLAIMS", layout=LogLayout("claims", 8))).ensure()  # as made: fine
    finally:
        await nc.close()


async def test_a_stream_made_before_partitions_is_refused_until_told_it_is_unpartitioned(nats_url: str):
    nc = await connect(nats_url)
    try:
        old = ClaimLog(nc, StreamSpec("CLAIMS", layout=LogLayout("claims", 0)))
        await old.ensure()
        claim = random_claim_id()
        await old.append(claim, [drafted(claim)], expected_seq=0, prev_hash=None)
        assert [s.subject for s in await old.read_claim(claim)] == [f"claims.{claim}.ClaimDrafted"]
        with pytest.raises(LogConfigError, match="unpartitioned .*CLAIMLOG_PARTITIONS=0.*export, import, verify"):
            await ClaimLog(nc, StreamSpec("CLAIMS")).ensure()
    finally:
        await nc.close()
