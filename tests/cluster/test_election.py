"""An append while the log elects a new leader says so, and that a retry will do: not that the stream is missing."""

from __future__ import annotations

import asyncio
import time

import pytest

from services.log import ClaimLog, PublishError
from services.runtime.cluster import LocalCluster
from tests.builders import drafted
from tests.cluster.test_faults import leader_of
from tests.conftest import random_claim_id

pytestmark = pytest.mark.cluster


async def test_an_append_during_the_logs_election_says_the_log_is_electing_a_leader(cluster: LocalCluster, replicated_log: ClaimLog):
    connected = replicated_log.nc._server_info["server_name"]
    leader = await leader_of(replicated_log, "CLAIMS")
    if leader == connected:  # kill a node the connection is not on: the append meets the election, not a reconnect
        await replicated_log.nc.request("$JS.API.STREAM.LEADER.STEPDOWN.CLAIMS", b"", timeout=5)
        leader = await leader_of(replicated_log, "CLAIMS")
        while leader == connected:
            await asyncio.sleep(0.1)
            leader = await leader_of(replicated_log, "CLAIMS")
    cluster.kill_node(leader)
    claim, said = random_claim_id(), []
    deadline = time.monotonic() + 30
    while True:
        try:
            await replicated_log.append(claim, [drafted(claim)], expected_seq=0, prev_hash=None)
            break
        except PublishError as error:
            said.append(str(error))
            assert time.monotonic() < deadline, said
            await asyncio.sleep(0.1)
    assert said, "the append met no election"  # the first try comes at once after the kill
    assert all("electing a leader" in message and "retry" in message for message in said), said
    assert not any("is the claim stream created" in message for message in said), said
