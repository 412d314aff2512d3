"""At start, claimlog warns loudly about a log a crash could take acknowledged events from."""

from __future__ import annotations

import json
import logging
import subprocess
import time
from pathlib import Path

import pytest

from services.log import ClaimLog, StreamSpec, connect
from services.log.durability import warn_if_server_not_synced
from services.runtime.embedded import EmbeddedNats, nats_server_binary
from services.runtime.processes import terminate


async def ensure(url: str, spec: StreamSpec) -> None:
    nc = await connect(url)
    try:
        await ClaimLog(nc, spec).ensure()
    finally:
        await nc.close()


def durability_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "DURABILITY" in r.getMessage()]


async def test_an_embedded_server_that_does_not_sync_always_is_warned_about(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    with EmbeddedNats(tmp_path / "lazy", sync="2m") as server, caplog.at_level(logging.WARNING):
        await ensure(server.url_for("admin"), StreamSpec("CLAIMS", server_sync="2m"))  # creates the stream
        await ensure(server.url_for("admin"), StreamSpec("CLAIMS", server_sync="2m"))  # attaches to it
    [created, attached] = durability_warnings(caplog)
    assert created == attached
    assert "flushes JetStream to disk every 2m, not before acknowledging" in created and "machine crashes" in created


async def test_an_embedded_server_that_syncs_always_on_one_machine_gets_no_warning(
    nats_url: str, caplog: pytest.LogCaptureFixture
):
    with caplog.at_level(logging.WARNING):
        await ensure(nats_url, StreamSpec("CLAIMS", server_sync="always"))
    assert durability_warnings(caplog) == []


async def test_a_stream_with_one_replica_on_a_cluster_url_is_warned_about(nats_url: str, caplog: pytest.LogCaptureFixture):
    # Two addresses, as CLAIMLOG_NATS_URL names a cluster's servers (here both reach the test's one server).
    second = nats_url.replace("127.0.0.1", "localhost")
    with caplog.at_level(logging.WARNING):
        await ensure(f"{nats_url},{second}", StreamSpec("CLAIMS", replicas=1))
    [warning] = durability_warnings(caplog)
    assert "stream CLAIMS has 1 replica on a cluster" in warning and "CLAIMLOG_NATS_REPLICAS=3" in warning


async def test_a_server_whose_sync_a_client_cannot_read_is_named_so(nats_url: str, caplog: pytest.LogCaptureFixture):
    nc = await connect(nats_url)  # admin, but not in the system account: the sync setting is not visible
    try:
        with caplog.at_level(logging.WARNING):
            [warning] = await warn_if_server_not_synced(nc)
    finally:
        await nc.close()
    assert "cannot tell whether the nats-server flushes to disk before acknowledging" in warning
    assert "$SYS.REQ.SERVER.PING.JSZ" in warning and "sync_interval: always" in warning
    assert durability_warnings(caplog) == [f"DURABILITY: {warning}"]


async def test_a_server_not_syncing_always_is_named_by_the_system_account(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    config = tmp_path / "system.conf"
    config.write_text(
        'listen: "127.0.0.1:-1"\nserver_name: "lazy-node"\n'
        f'ports_file_dir: "{tmp_path}"\n'
        f'jetstream {{ store_dir: "{tmp_path / "js"}", sync_interval: "2m" }}\n'
        "accounts { SYS { users: [{user: sys, password: sys}] } }\nsystem_account: SYS\n"
    )
    process = subprocess.Popen([str(nats_server_binary()), "-c", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        ports = tmp_path / f"nats-server_{process.pid}.ports"
        for _ in range(500):
            if ports.exists():
                break
            time.sleep(0.02)
        address = json.loads(ports.read_text())["nats"][0].removeprefix("nats://")
        nc = await connect(f"nats://sys:sys@{address}")
        try:
            with caplog.at_level(logging.WARNING):
                [warning] = await warn_if_server_not_synced(nc)
        finally:
            await nc.close()
    finally:
        terminate(process, timeout=10)
    assert warning.startswith("nats-server(s) lazy-node do not sync always")
