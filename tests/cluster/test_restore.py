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
from tests.integration.long_log import write_interleaved
from tests.integration.test_backup import whole_log

pytestmark = pytest.mark.cluster


def exact(stored) -> list[tuple]:
    return [(s.seq, s.subject, s.data, s.msg_id, s.stored_at, s.signature) for s in stored]


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
