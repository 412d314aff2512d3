"""A reader's consumer on a server that dies: the next pull says so at once, and a start makes a copy on a live server.

A consumer holds nothing its reader cannot rebuild (each start positions it from the reader's
checkpoint), so it is made with one copy, in memory: cheap to make while a node is down, where
replicated consumers took longer to make than the request timeout, again and again.
"""

from __future__ import annotations

import asyncio

import nats.errors
import pytest

from services.log import ClaimLog, LogError
from services.log.consumer import DurableConsumer
from services.runtime.cluster import LocalCluster
from tests.builders import drafted


async def _holder(claim_log: ClaimLog, name: str) -> str:
    return (await claim_log.nc.jetstream().consumer_info(claim_log.stream, name)).cluster.leader


async def test_a_consumer_is_one_copy_in_memory(replicated_log: ClaimLog):
    consumer = replicated_log.consumer("one-copy", max_batch=10)
    await consumer.start(0)
    info = await replicated_log.nc.jetstream().consumer_info(replicated_log.stream, "one-copy")
    assert (info.config.num_replicas, info.config.mem_storage) == (1, True)
    assert info.cluster.replicas in (None, [])  # no copies on other servers
    await consumer.stop()


async def test_a_consumer_whose_server_died_is_made_again_on_a_live_one(cluster: LocalCluster, replicated_log: ClaimLog):
    await replicated_log.append("CLM-0001", [drafted("CLM-0001")], expected_seq=0, prev_hash=None)
    stream_leader = (await replicated_log.nc.jetstream().stream_info(replicated_log.stream)).cluster.leader
    # Make consumers until one sits on a server that leads neither the stream nor the connection's own
    # route: killing it leaves the log writable and this client connected.
    connected = replicated_log.nc.connected_url.port
    victim, consumer = None, None
    for n in range(40):
        candidate = DurableConsumer(replicated_log.nc, replicated_log.stream, f"reader-{n}", max_batch=10, layout=replicated_log.layout)
        await candidate.start(0)
        holder = await _holder(replicated_log, f"reader-{n}")
        node = cluster.node(holder)
        if holder != stream_leader and node.port != connected:
            victim, consumer = holder, candidate
            break
        await candidate.stop()
    assert consumer is not None, "no consumer was placed on a follower the client is not connected to in 40 tries"
    assert [d.seq for d in await consumer.next_batch(timeout=5)] == [1]
    cluster.kill_node(victim)
    loop = asyncio.get_running_loop()
    began = loop.time()
    with pytest.raises(LogError, match="503"):
        while loop.time() - began < 30:
            await consumer.next_batch(timeout=1)
    assert loop.time() - began < 10
    while True:  # as the runner does: again, from its checkpoint, while the cluster may still elect a new meta leader
        try:
            await consumer.start(0)
            break
        except nats.errors.TimeoutError:
            assert loop.time() - began < 30, "no consumer could be made within 30 s of the kill"
    assert await _holder(replicated_log, consumer._name) != victim
    await replicated_log.append("CLM-0002", [drafted("CLM-0002")], expected_seq=0, prev_hash=None)
    seen: list[int] = []
    while len(seen) < 2 and loop.time() - began < 30:
        seen += [d.seq for d in await consumer.next_batch(timeout=5)]
    assert seen == [1, 2]
    await consumer.stop()
