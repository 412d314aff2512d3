"""``claimlog status`` on a cluster that lost its majority: the node it is connected to is reachable, the log is
named as having no leader, and no copy is called behind (there is no leader to be behind)."""

from __future__ import annotations

import asyncio
import time

import pytest
from sqlalchemy import Engine

from services.log import ClaimLog
from services.runtime.cluster import LocalCluster
from tests.cluster.test_status import status

pytestmark = pytest.mark.cluster


async def test_status_with_the_majority_lost_calls_its_own_node_reachable_and_no_copy_behind(
    cluster: LocalCluster, replicated_log: ClaimLog, pg_engine: Engine, postgres_url: str
):
    survivor = cluster.nodes[0].name  # status connects to the first node of the URL that answers
    for node in cluster.nodes[1:]:
        cluster.kill_node(node.name)
    deadline = time.monotonic() + 90
    while True:  # the survivor keeps its leadership until it misses the others' votes
        try:
            info = await asyncio.wait_for(replicated_log.nc.jetstream(timeout=2).stream_info("CLAIMS"), 3)
            if not info.cluster.leader:
                break
        except Exception:  # noqa: BLE001, S110 - the survivor is busy with its election: ask again
            pass
        assert time.monotonic() < deadline, "the log kept a leader with two of three nodes down"
        await asyncio.sleep(0.5)
    code, report = await asyncio.to_thread(status, cluster, postgres_url)
    nats = report["nats"]
    assert code == 1 and nats["nodes"][survivor]["reachable"], nats
    assert any("the log (CLAIMS) has no leader" in problem for problem in nats["problems"]), nats["problems"]
    assert not any("behind by 0" in problem for problem in nats["problems"]), nats["problems"]
    assert "did not answer" in report["signing"].get("unknown", "") or "required_after" in report["signing"], report["signing"]
