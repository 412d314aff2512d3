"""Everything claimlog keeps on NATS (the log, the token store, the partition leases) has CLAIMLOG_NATS_REPLICAS copies, made or raised at start-up; fewer is an error."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.identity.actors import BUCKET, ActorStore
from services.log import ClaimLog, LogConfigError, NatsTls, StreamSpec, connect
from services.projector.leases import BUCKET as LEASES
from services.projector.leases import Leases
from services.runtime.cluster import LocalCluster
from services.runtime.from_settings import ensure_log, open_log
from services.runtime.settings import Settings

pytestmark = pytest.mark.cluster


async def replicas(url: str, stream: str, tls: NatsTls) -> tuple[int, int]:
    """The stream's configured replicas, and the peers the cluster reports for it (leader included)."""
    nc = await connect(url, tls=tls)
    try:
        info = await nc.jetstream().stream_info(stream)
        return info.config.num_replicas, 1 + len(info.cluster.replicas or [])
    finally:
        await nc.close()


async def test_the_log_and_the_token_store_made_with_one_copy_are_raised_to_the_setting_at_start(
    cluster: LocalCluster, tmp_path: Path
):
    url = cluster.url_for("admin")
    nc = await connect(url, tls=cluster.tls)
    try:  # a deployment from before the setting reached the token store: one copy of each
        await ClaimLog(nc, StreamSpec("CLAIMS", replicas=1)).ensure()
        await ActorStore.open(nc, create=True, replicas=1)
        await Leases.open(nc.jetstream(), "worker-1", ttl=5, replicas=1)
    finally:
        await nc.close()
    assert await replicas(url, f"KV_{BUCKET}", cluster.tls) == (1, 1)

    await ensure_log(Settings(nats_url=url, nats_tls_ca=cluster.tls.ca, nats_replicas=3, data_dir=tmp_path))

    assert await replicas(url, "CLAIMS", cluster.tls) == (3, 3)
    assert await replicas(url, f"KV_{BUCKET}", cluster.tls) == (3, 3)
    assert await replicas(url, f"KV_{LEASES}", cluster.tls) == (3, 3)


async def test_actors_add_makes_the_token_store_with_the_setting_s_replicas(cluster: LocalCluster, tmp_path: Path):
    url = cluster.url_for("admin")
    async with open_log(Settings(nats_url=url, nats_tls_ca=cluster.tls.ca, nats_replicas=3, data_dir=tmp_path)) as claim_log:
        await ActorStore.open(claim_log.nc, create=True, replicas=claim_log.spec.replicas)
    assert await replicas(url, f"KV_{BUCKET}", cluster.tls) == (3, 3)


async def test_a_reader_is_told_when_the_log_has_fewer_replicas_than_asked(cluster: LocalCluster, tmp_path: Path):
    url = cluster.url_for("admin")
    await ensure_log(Settings(nats_url=url, nats_tls_ca=cluster.tls.ca, nats_replicas=1, data_dir=tmp_path))
    with pytest.raises(LogConfigError, match=r"stream CLAIMS has 1 replica\(s\), fewer than CLAIMLOG_NATS_REPLICAS=3"):
        async with open_log(Settings(nats_url=url, nats_tls_ca=cluster.tls.ca, nats_replicas=3, data_dir=tmp_path), create=False):
            pass


async def test_a_single_server_asked_for_three_replicas_stops_the_start_with_the_reason(nats_url: str, tmp_path: Path):
    with pytest.raises(LogConfigError, match=r"stream CLAIMS needs 3 replicas .*cannot hold them"):
        await ensure_log(Settings(nats_url=nats_url, nats_replicas=3, data_dir=tmp_path))
