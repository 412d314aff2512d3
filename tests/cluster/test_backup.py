"""A backup of a registry restored into a fresh three-node cluster: the same log and pages, ``verify`` clean,
tokens working, and the token store on three nodes like the log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from services.identity.actors import BUCKET
from services.log import ClaimLog, StreamSpec, connect
from services.runtime.cluster import LocalCluster
from services.runtime.embedded import EmbeddedNats
from tests.integration.audit_log import write_claims
from tests.integration.test_backup import fingerprint, token_actor

pytestmark = pytest.mark.cluster


def claimlog(*args: str, url: str, cwd: Path, **settings: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAIMLOG_")}
    env |= {"CLAIMLOG_NATS_URL": url, "CLAIMLOG_DATA_DIR": str(cwd / ".claimlog"), "COLUMNS": "250"}
    env |= {f"CLAIMLOG_{name.upper()}": value for name, value in settings.items()}
    return subprocess.run([sys.executable, "-m", "services.cli", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=180)


async def test_a_backup_restored_into_a_fresh_cluster_is_the_same_registry_on_three_nodes(cluster: LocalCluster, tmp_path: Path):
    with EmbeddedNats(tmp_path / "single") as source:
        added = claimlog("actors", "add", "ada", "--kind", "person", url=source.url_for("admin"), cwd=tmp_path)
        assert added.returncode == 0, added.stderr
        token = added.stdout.strip().splitlines()[-1]
        nc = await connect(source.url_for("admin"))
        try:
            await write_claims(ClaimLog(nc, StreamSpec("CLAIMS")), count=6)
        finally:
            await nc.close()
        before = await fingerprint(source.url_for("admin"), tmp_path, "source")
        done = claimlog("backup", str(tmp_path / "backup"), url=source.url_for("admin"), cwd=tmp_path)
        assert done.returncode == 0, done.stderr

    on_cluster = {"nats_tls_ca": str(cluster.tls.ca), "nats_replicas": "3"}
    url = cluster.url_for("admin")
    restored = claimlog("restore", str(tmp_path / "backup"), url=url, cwd=tmp_path, **on_cluster)
    assert restored.returncode == 0, restored.stderr
    assert await fingerprint(url, tmp_path, "restored", cluster.tls) == before
    assert await token_actor(url, token, cluster.tls) == "ada"
    nc = await connect(url, tls=cluster.tls)
    try:
        for stream in ("CLAIMS", f"KV_{BUCKET}"):
            info = await nc.jetstream().stream_info(stream)
            assert (info.config.num_replicas, 1 + len(info.cluster.replicas or [])) == (3, 3), stream
    finally:
        await nc.close()
    verified = claimlog("verify", "--json", url=url, cwd=tmp_path, database_url=f"sqlite:///{tmp_path / 'restored.sqlite3'}", **on_cluster)
    report = json.loads(verified.stdout)
    assert verified.returncode == 0 and report["findings"] == [] and report["events"] == len(before[0]), verified.stderr
