"""``claimlog up --cluster 3`` watches its nodes: one killed is reaped, said in the log, and started again on its
ports and store; it catches up with the others, and the registry takes writes throughout."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

import pytest

from services.log import NatsTls, connect
from services.runtime.embedded import running_url
from services.runtime.local_ca import local_ca_file
from tests.e2e.test_up import alive, free_port, wait_for_page
from tests.e2e.test_up_supervises_nats import (
    recorded,
    recorded_anew,
    said,
    start_up,
    stop,
    wait_until,
    written_through_the_api,
)

pytestmark = pytest.mark.cluster


async def copies_current(data_dir: Path) -> bool:
    """Whether every copy of the log beside its leader's is current: three copies, none offline or behind."""
    nc = await connect(running_url(data_dir, "admin"), tls=NatsTls(ca=local_ca_file(data_dir)))
    try:
        replicas = (await nc.jetstream().stream_info("CLAIMS")).cluster.replicas or []
        return len(replicas) == 2 and all(r.current and not r.offline for r in replicas)
    finally:
        await nc.close()


def test_up_cluster_restarts_a_killed_node_on_its_ports_and_store_and_the_cluster_heals(tmp_path: Path):
    data_dir, port, output = tmp_path / ".claimlog", free_port(), tmp_path / "up.out"
    base = f"http://127.0.0.1:{port}"
    process = start_up("--cluster", "3", "--sample", "--port", str(port), cwd=tmp_path, output=output)
    try:
        wait_for_page(f"{base}/claims/CLM-0338", process)
        before = recorded(data_dir)
        os.kill(before["pids"][1], signal.SIGKILL)

        wait_until(lambda: "nats-server claimlog-2 exited (killed by SIGKILL); restarting" in said(output), "log line of the restart", process)
        after = wait_until(lambda: recorded_anew(data_dir, before["pids"][1], node=1), "record of the restarted node", process)
        assert after["urls"] == before["urls"] and after["pids"][0::2] == before["pids"][0::2]
        assert not alive(before["pids"][1])  # reaped, not left a zombie
        seq = written_through_the_api(base, tmp_path, process)
        assert "after-restart" in json.dumps(wait_for_page(f"{base}/claims/CLM-0338?after={seq}", process))
        wait_until(lambda: asyncio.run(copies_current(data_dir)), "current copy of the log on every node", process)
    finally:
        said_in_all = stop(process, output)
    assert "claimlog stopped" in said_in_all
    assert not any(alive(pid) for pid in after["pids"])
