"""``claimlog backup`` and ``claimlog restore``: a backup restored into a fresh server is the same registry:
the same log byte for byte, the same pages, ``verify`` as clean, and every token still working.

The same into a fresh three-node cluster: tests/cluster/test_backup.py."""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat
from sqlalchemy import Engine

from projections.checksum import table_checksums
from services.identity.actors import BUCKET, ActorStore
from services.log import ClaimLog, NatsTls, StoredEvent, StreamSpec, connect
from services.runtime.db import make_engine, upgrade
from services.runtime.embedded import EmbeddedNats
from tests.integration.audit_log import claimlog, project, verify_json, write_claims


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[tuple[EmbeddedNats, EmbeddedNats]]:
    """The registry's server, and a fresh one to restore into."""
    with EmbeddedNats(tmp_path / "source") as source, EmbeddedNats(tmp_path / "fresh") as fresh:
        yield source, fresh


def read_models(path: Path) -> Engine:
    engine = make_engine(f"sqlite:///{path}")
    upgrade(engine)
    return engine


async def whole_log(claim_log: ClaimLog) -> list[StoredEvent]:
    stored, after = [], 0
    while page := await claim_log.read_log(after_seq=after, limit=500):
        stored.extend(page)
        after = page[-1].seq
    return stored


def identity(stored: list[StoredEvent]) -> list[tuple]:
    return [(s.seq, s.subject, s.hash, s.msg_id, s.stored_at) for s in stored]


async def fingerprint(url: str, tmp_path: Path, name: str, tls: NatsTls | None = None) -> tuple[list[tuple], dict]:
    """The log's identity and the pages folded from it (into ``<name>.sqlite3``), on the server at ``url``."""
    nc = await connect(url, tls=tls)
    try:
        claim_log = ClaimLog(nc, StreamSpec("CLAIMS"))
        engine = read_models(tmp_path / f"{name}.sqlite3")
        try:
            await project(claim_log, engine)
            with engine.connect() as conn:
                pages = table_checksums(conn)
        finally:
            engine.dispose()
        return identity(await whole_log(claim_log)), pages
    finally:
        await nc.close()


async def token_actor(url: str, token: str, tls: NatsTls | None = None) -> str | None:
    nc = await connect(url, tls=tls)
    try:
        actor = await (await ActorStore.open(nc)).authenticate(token)
        return actor.id if actor else None
    finally:
        await nc.close()


def unclocked(verified: tuple[int, dict]) -> tuple[int, dict]:
    """verify's exit code and report, without how long it took."""
    code, report = verified
    return code, {k: v for k, v in report.items() if not k.endswith("_seconds")}


@pytest.mark.private_nats
async def test_a_backup_restored_into_a_fresh_server_is_the_same_registry(servers, tmp_path: Path):
    source, fresh = servers
    added = claimlog("actors", "add", "ada", "--kind", "person", nats_url=source.url_for("admin"), cwd=tmp_path)
    assert added.returncode == 0, added.stderr
    token = added.stdout.strip().splitlines()[-1]
    nc = await connect(source.url_for("admin"))
    try:
        await write_claims(ClaimLog(nc, StreamSpec("CLAIMS")))
    finally:
        await nc.close()
    before = await fingerprint(source.url_for("admin"), tmp_path, "source")
    verified_before = verify_json(nats_url=source.url_for("admin"), database_url=f"sqlite:///{tmp_path / 'source.sqlite3'}", cwd=tmp_path)

    backup = tmp_path / "backup"
    done = claimlog("backup", str(backup), nats_url=source.url_for("admin"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    manifest = json.loads((backup / "manifest.json").read_text())
    assert manifest["buckets"] == [BUCKET] and manifest["events"] == manifest["head"] == len(before[0])
    assert stat.S_IMODE(backup.stat().st_mode) == 0o700
    assert {stat.S_IMODE(p.stat().st_mode) for p in backup.rglob("*") if p.is_file()} == {0o600}
    again = claimlog("backup", str(backup), nats_url=source.url_for("admin"), cwd=tmp_path)
    assert again.returncode == 1 and "not an empty directory" in again.stderr

    restored = claimlog("restore", str(backup), nats_url=fresh.url_for("admin"), cwd=tmp_path)
    assert restored.returncode == 0, restored.stderr
    after = await fingerprint(fresh.url_for("admin"), tmp_path, "restored")
    assert after == before
    assert await token_actor(fresh.url_for("admin"), token) == "ada"
    verified_after = verify_json(nats_url=fresh.url_for("admin"), database_url=f"sqlite:///{tmp_path / 'restored.sqlite3'}", cwd=tmp_path)
    assert unclocked(verified_after) == unclocked(verified_before) and verified_after[0] == 0

    twice = claimlog("restore", str(backup), nats_url=fresh.url_for("admin"), cwd=tmp_path)
    assert twice.returncode == 1 and "is not empty" in twice.stderr and "nothing was restored" in twice.stderr


@pytest.mark.private_nats
async def test_an_unfinished_or_altered_backup_restores_nothing(servers, tmp_path: Path):
    source, fresh = servers
    nc = await connect(source.url_for("admin"))
    try:
        claim_log = ClaimLog(nc, StreamSpec("CLAIMS"))
        await claim_log.ensure()
        await write_claims(claim_log)
    finally:
        await nc.close()
    backup = tmp_path / "backup"
    assert claimlog("backup", str(backup), nats_url=source.url_for("admin"), cwd=tmp_path).returncode == 0

    log = backup / "log.jsonl"
    lines = log.read_text().splitlines()
    changed = json.loads(lines[1])
    changed["event"] += " "  # its hash no longer matches
    lines[1] = json.dumps(changed)
    log.write_text("\n".join(lines) + "\n")
    altered = claimlog("restore", str(backup), nats_url=fresh.url_for("admin"), cwd=tmp_path)
    assert altered.returncode == 1 and "log.jsonl is not the file the backup wrote" in altered.stderr
    assert "nothing was restored" in altered.stderr

    (backup / "manifest.json").unlink()
    unfinished = claimlog("restore", str(backup), nats_url=fresh.url_for("admin"), cwd=tmp_path)
    assert unfinished.returncode == 1 and "did not finish" in unfinished.stderr
    nc = await connect(fresh.url_for("admin"))
    try:
        assert [info.config.name for info in await nc.jetstream().streams_info()] == []  # refused before anything was made
    finally:
        await nc.close()


@pytest.mark.private_nats
async def test_key_files_are_kept_and_put_back_where_they_were_missing(servers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    source, fresh = servers
    nc = await connect(source.url_for("admin"))
    try:
        await ClaimLog(nc, StreamSpec("CLAIMS")).ensure()
    finally:
        await nc.close()
    keys = tmp_path / "keys"
    keys.mkdir()
    signing, other = keys / "api.pem", keys / "producer.pem"
    for path in (signing, other):
        path.write_bytes(Ed25519PrivateKey.generate().private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()))
        path.chmod(0o600)
    absent = claimlog("backup", str(tmp_path / "none"), "--key", str(keys / "gone.pem"), nats_url=source.url_for("admin"), cwd=tmp_path)
    assert absent.returncode == 1 and "gone.pem is not there" in absent.stderr and not (tmp_path / "none").exists()

    backup = tmp_path / "backup"
    with monkeypatch.context() as env:
        env.setenv("CLAIMLOG_SIGNING_KEY", str(signing))
        done = claimlog("backup", str(backup), "--key", str(other), nats_url=source.url_for("admin"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    manifest = json.loads((backup / "manifest.json").read_text())
    assert [key["path"] for key in manifest["keys"]] == [str(signing.resolve()), str(other.resolve())]
    originals = {signing: signing.read_bytes(), other: other.read_bytes()}

    signing.unlink()
    other.write_bytes(b"a key made since")
    named = ("--key-to", str(signing), "--key-to", str(other))  # outside the data directory: the operator names them
    clash = claimlog("restore", str(backup), *named, nats_url=fresh.url_for("admin"), cwd=tmp_path)
    assert clash.returncode == 1 and "holds another key" in clash.stderr and not signing.exists()
    other.write_bytes(originals[other])
    restored = claimlog("restore", str(backup), *named, nats_url=fresh.url_for("admin"), cwd=tmp_path)
    assert restored.returncode == 0, restored.stderr
    assert signing.read_bytes() == originals[signing] and stat.S_IMODE(signing.stat().st_mode) == 0o600
