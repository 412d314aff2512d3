"""A log of interleaved claims, longer than a few restore batches, restored and imported into three-replica
streams: every event at its own sequence with its bytes, message id, store time and signature."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from services.audit.export import read_export
from services.log import ClaimLog, StreamSpec, connect
from services.log.restore import Republisher
from services.runtime.cluster import LocalCluster
from services.runtime.embedded import EmbeddedNats
from tests.cluster.test_backup import claimlog
from tests.conftest import random_claim_id
from tests.integration.audit_log import publish_raw
from tests.integration.restoring import exact, killed_at_its_first_event, resume_command, write_interleaved
from tests.integration.test_backup import whole_log

pytestmark = pytest.mark.cluster
DEADLINE = 60.0


@pytest.fixture
async def source(tmp_path: Path) -> AsyncIterator[tuple[Path, list[tuple]]]:
    """A backup of 2,400 events over 200 claims (each claim in every batch of 1,000), and the log it holds."""
    with EmbeddedNats(tmp_path / "single") as server:
        nc = await connect(server.url_for("admin"))
        try:
            claim_log = ClaimLog(nc, StreamSpec("CLAIMS"))
            await claim_log.ensure()
            assert await write_interleaved(claim_log) == 2400
            log = exact(await whole_log(claim_log))
        finally:
            await nc.close()
        done = claimlog("backup", str(tmp_path / "backup"), url=server.url_for("admin"), cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    yield tmp_path / "backup", log


async def stored(cluster: LocalCluster, stream: str = "CLAIMS") -> list[tuple]:
    nc = await connect(cluster.url_for("admin"), tls=cluster.tls)
    try:
        info = await nc.jetstream().stream_info(stream)
        assert 1 + len(info.cluster.replicas or []) == 3, stream
        return exact(await whole_log(ClaimLog(nc, StreamSpec(stream))))
    finally:
        await nc.close()


async def test_a_backup_of_claims_spread_over_many_batches_restores_into_a_three_node_cluster_exactly(
    cluster: LocalCluster, source, tmp_path: Path
):
    backup, log = source
    restored = claimlog("restore", str(backup), url=cluster.url_for("admin"), cwd=tmp_path,
                        nats_tls_ca=str(cluster.tls.ca), nats_replicas="3")
    assert restored.returncode == 0, restored.stderr
    assert await stored(cluster) == log


async def test_an_export_imports_into_a_three_replica_stream_exactly(cluster: LocalCluster, source, tmp_path: Path):
    backup, log = source
    imported = claimlog("import", str(backup / "log.jsonl"), url=cluster.url_for("admin"), cwd=tmp_path,
                        nats_tls_ca=str(cluster.tls.ca), nats_replicas="3")
    assert imported.returncode == 0, imported.stderr
    assert "imported 2400 events at sequences 1 to 2400" in imported.stderr
    assert await stored(cluster) == log


async def test_one_publish_per_event_pipelined_into_a_three_replica_stream_without_atomic_batches_is_exact(
    cluster: LocalCluster, source, tmp_path: Path
):
    backup, log = source
    nc = await connect(cluster.url_for("admin"), tls=cluster.tls)
    try:
        config = StreamSpec("CLAIMS", replicas=3).config()
        config.allow_atomic = False
        await nc.jetstream().add_stream(config)
        async with Republisher(nc, "CLAIMS", window=256) as republisher:
            for _, event in read_export(backup / "log.jsonl"):
                await republisher.publish(event)
    finally:
        await nc.close()
    assert await stored(cluster) == log


async def test_an_import_refused_half_way_into_three_replicas_resumes_to_an_exact_copy(cluster: LocalCluster, tmp_path: Path):
    with EmbeddedNats(tmp_path / "single") as server:
        nc = await connect(server.url_for("admin"))
        try:
            claim_log = ClaimLog(nc, StreamSpec("CLAIMS"))
            await claim_log.ensure()
            await write_interleaved(claim_log, rounds=7)
            await publish_raw(server.url_for("admin"), f"claims.{random_claim_id()}.ClaimDrafted", b"x" * 20_000)  # sequence 1,401
            await write_interleaved(claim_log, rounds=3)
            log = exact(await whole_log(claim_log))
        finally:
            await nc.close()
        exported = tmp_path / "log.jsonl"
        assert claimlog("export", "--out", str(exported), url=server.url_for("admin"), cwd=tmp_path).returncode == 0
    on_cluster = {"nats_tls_ca": str(cluster.tls.ca), "nats_replicas": "3"}
    nc = await connect(cluster.url_for("admin"), tls=cluster.tls)
    try:  # three copies of a stream that takes no message of 20 kB: the batch holding sequence 1,401 is refused whole
        await ClaimLog(nc, StreamSpec("CLAIMS", replicas=3)).ensure()
        config = (await nc.jetstream().stream_info("CLAIMS")).config
        config.max_msg_size = 10_000
        await nc.jetstream().update_stream(config)
        failed = claimlog("import", str(exported), url=cluster.url_for("admin"), cwd=tmp_path, **on_cluster)
        assert failed.returncode == 1 and "the stream now ends at 1000" in failed.stderr, failed.stderr
        config.max_msg_size = -1
        await nc.jetstream().update_stream(config)
    finally:
        await nc.close()

    resumed = claimlog(*resume_command(failed.stderr), url=cluster.url_for("admin"), cwd=tmp_path, **on_cluster)
    assert resumed.returncode == 0, resumed.stderr
    assert f"imported {len(log) - 1000} events at sequences 1001 to {len(log)}, after the 1000 already there" in resumed.stderr
    assert await stored(cluster) == log


async def test_a_restore_killed_half_way_into_a_three_node_cluster_resumes_to_an_exact_copy(cluster: LocalCluster, tmp_path: Path):
    with EmbeddedNats(tmp_path / "single") as server:
        nc = await connect(server.url_for("admin"))
        try:
            claim_log = ClaimLog(nc, StreamSpec("CLAIMS"))
            await claim_log.ensure()
            await write_interleaved(claim_log, rounds=50)
            log = exact(await whole_log(claim_log))
        finally:
            await nc.close()
        assert claimlog("backup", str(tmp_path / "backup"), url=server.url_for("admin"), cwd=tmp_path).returncode == 0
    settings = {"CLAIMLOG_NATS_URL": cluster.url_for("admin"), "CLAIMLOG_DATA_DIR": str(tmp_path / ".claimlog"),
                "CLAIMLOG_NATS_TLS_CA": str(cluster.tls.ca), "CLAIMLOG_NATS_REPLICAS": "3"}
    await killed_at_its_first_event(["restore", str(tmp_path / "backup")], env=settings, cwd=tmp_path, tls=cluster.tls, deadline=DEADLINE)
    stopped = await stored(cluster)
    assert 0 < len(stopped) < len(log) and stopped == log[: len(stopped)]

    resumed = claimlog("restore", str(tmp_path / "backup"), url=cluster.url_for("admin"), cwd=tmp_path,
                       nats_tls_ca=str(cluster.tls.ca), nats_replicas="3")
    assert resumed.returncode == 0, resumed.stderr
    assert await stored(cluster) == log
