"""``claimlog up --cluster 3``: three nats-servers, the projector and the API; the other commands find the cluster
from the data directory; Ctrl-C stops it all, and the next start finds the same cluster."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from services.log import NatsTls, connect
from services.runtime.embedded import running_url
from services.runtime.local_ca import local_ca_file
from tests.e2e.test_up import alive, free_port, wait_for_page

pytestmark = pytest.mark.cluster


def claimlog(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "services.cli", *args], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def run(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "services.cli", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


async def replicas(data_dir: Path) -> dict[str, tuple[int, int]]:
    """Each stream's configured replicas and the peers holding it."""
    nc = await connect(running_url(data_dir, "admin"), tls=NatsTls(ca=local_ca_file(data_dir)))
    try:
        infos = [await nc.jetstream().stream_info(name) for name in ("CLAIMS", "KV_claimlog_actors")]
        return {i.config.name: (i.config.num_replicas, 1 + len(i.cluster.replicas or [])) for i in infos}
    finally:
        await nc.close()


def stop(process: subprocess.Popen[str]) -> str:
    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=60)
    assert process.returncode == 0, output
    return output


def test_up_cluster_runs_three_nodes_that_the_other_commands_find_and_a_second_start_finds_again(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAIMLOG_")}
    data_dir = tmp_path / ".claimlog"
    port = free_port()
    process = claimlog("up", "--cluster", "3", "--sample", "--port", str(port), cwd=tmp_path, env=env)
    try:
        wait_for_page(f"http://127.0.0.1:{port}/claims/CLM-0338", process)
        nodes = json.loads((data_dir / "nats.json").read_text())["pids"]
        assert len(nodes) == 3 and all((data_dir / f"node-{i}" / "jetstream").is_dir() for i in (1, 2, 3))
        children = subprocess.run(["pgrep", "-P", str(process.pid)], capture_output=True, text=True).stdout.split()
        assert sorted(int(pid) for pid in children if int(pid) in nodes) == sorted(nodes) and len(children) == 3 + 3  # projector, tlog, api

        added = run("actors", "add", "ada", "--kind", "person", cwd=tmp_path, env=env)
        assert added.returncode == 0 and added.stdout.startswith("clm_"), added.stderr
        verified = run("verify", cwd=tmp_path, env=env)
        assert verified.returncode == 0 and "no findings" in verified.stdout + verified.stderr, verified.stdout + verified.stderr
        assert asyncio.run(replicas(data_dir)) == {"CLAIMS": (3, 3), "KV_claimlog_actors": (3, 3)}
    finally:
        output = stop(process)
    assert "local NATS cluster of 3 nodes (3 replicas)" in output and "claimlog stopped" in output
    assert not any(alive(pid) for pid in nodes) and not (data_dir / "nats.json").exists()

    again = claimlog("up", "--port", str(port), cwd=tmp_path, env=env)
    try:
        page = wait_for_page(f"http://127.0.0.1:{port}/claims/CLM-0338", again)
        assert page["claim_id"] == "CLM-0338"
        assert len(json.loads((data_dir / "nats.json").read_text())["pids"]) == 3
    finally:
        output = stop(again)
    assert "local NATS cluster of 3 nodes" in output and "creating stream" not in output


def test_up_cluster_refuses_a_data_directory_of_a_single_server_and_says_why(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAIMLOG_")}
    (tmp_path / ".claimlog" / "jetstream").mkdir(parents=True)
    result = run("up", "--cluster", "3", "--port", str(free_port()), cwd=tmp_path, env=env)
    assert result.returncode == 2
    assert "holds the log of a single embedded server" in " ".join(result.stdout.split())
    assert not (tmp_path / ".claimlog" / "cluster.json").exists()
