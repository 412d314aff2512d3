"""``GET /health`` and ``claimlog status`` show the NATS nodes, which holds the log's leader, whether each copy is
current, and the projector's position and lag."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest
from sqlalchemy import Engine

from services.log import ClaimLog
from services.runtime.cluster import LocalCluster
from tests.integration.guarded_api import guarded_api
from tests.integration.test_health import append_drafts

pytestmark = pytest.mark.cluster


def status(cluster: LocalCluster, postgres_url: str) -> tuple[int, dict]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAIMLOG_")}
    env |= {"CLAIMLOG_NATS_URL": cluster.url_for("admin"), "CLAIMLOG_DATABASE_URL": postgres_url, "CLAIMLOG_NATS_REPLICAS": "3",
            "CLAIMLOG_NATS_TLS_CA": str(cluster.tls.ca)}
    done = subprocess.run(
        [sys.executable, "-m", "services.cli", "status", "--json"], env=env, capture_output=True, text=True, timeout=60
    )
    try:
        return done.returncode, json.loads(done.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"claimlog status --json printed no JSON (exit {done.returncode}): {done.stdout!r}\n{done.stderr}") from None


async def test_health_and_status_show_the_nodes_the_leader_and_a_killed_node(
    cluster: LocalCluster, replicated_log: ClaimLog, pg_engine: Engine, postgres_url: str
):
    async for guarded in guarded_api(replicated_log, pg_engine):
        head = await append_drafts(replicated_log, 3)
        await guarded.project()
        await append_drafts(replicated_log, 2)
        body = (await guarded.api.http.get("/health")).json()
        assert body["status"] == "ok" and body["head"] == head + 2
        assert body["projections"]["claim_pages"] == head and body["lag_events"]["claim_pages"] == 2
        nats = body["nats"]
        leader = nats["streams"]["CLAIMS"]["leader"]
        assert set(nats["nodes"]) == {"claimlog-1", "claimlog-2", "claimlog-3"} and nats["problems"] == []
        assert all(node["reachable"] for node in nats["nodes"].values()) and "CLAIMS" in nats["nodes"][leader]["leads"]

        follower = next(name for name in nats["nodes"] if name != leader)
        cluster.kill_node(follower)
        for _ in range(100):  # the leader misses the follower within a few seconds
            body = (await guarded.api.http.get("/health")).json()
            node = body["nats"]["nodes"][follower]
            if not node["reachable"] and "CLAIMS" in node["lagging"]:
                break
            await asyncio.sleep(0.2)
        assert body["status"] == "degraded" and "CLAIMS" in body["nats"]["nodes"][follower]["lagging"]
        assert any(f"has not heard from {follower}" in problem for problem in body["nats"]["problems"])

    code, report = await asyncio.to_thread(status, cluster, postgres_url)
    assert code == 1 and report["head"] == head + 2
    assert report["projections"]["claim_pages"] == {"last_seq": head, "lag_events": 2}
    assert not report["nats"]["nodes"][follower]["reachable"] and report["nats"]["streams"]["CLAIMS"]["replicas"] == 3
