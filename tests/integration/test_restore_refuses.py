"""``claimlog restore`` of a tampered backup: it reads only inside the backup, writes only inside the data
directory (or where the operator names on the command line), and checks the log's chains and
signatures against the backed-up key registry before anything is switched in; each probe is refused
with its reason, and nothing is restored."""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from events import Actor, ActorKind
from services.identity.keys import KeyRing
from services.log import ClaimLog, StreamSpec, connect
from services.log.signing import Signer
from services.orchestration.trust import ensure_trust
from services.runtime.embedded import EmbeddedNats
from services.runtime.settings import Settings
from tests.integration.audit_log import claimlog, write_claims


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[tuple[EmbeddedNats, EmbeddedNats, EmbeddedNats]]:
    """The registry's server, a stranger's registry, and a fresh server to restore into."""
    with EmbeddedNats(tmp_path / "source") as source, EmbeddedNats(tmp_path / "other") as other, EmbeddedNats(tmp_path / "fresh") as fresh:
        yield source, other, fresh


async def signed_registry(url: str, key_file: Path) -> None:
    """A registry whose API key is registered and signs every event."""
    signer = Signer.generate()
    key_file.write_bytes(signer.pem())
    key_file.chmod(0o600)
    nc = await connect(url)
    try:
        claim_log = ClaimLog(nc, StreamSpec("CLAIMS"), signer=signer)
        await claim_log.ensure()
        ring = await KeyRing.open(nc)
        await ring.add(Actor(id="claimlog-api", kind=ActorKind.SERVICE), delegate=True, signer=signer)
        await ring.require(0)
        await write_claims(claim_log)
    finally:
        await nc.close()


def backed_up(server: EmbeddedNats, key_file: Path, directory: Path, cwd: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    with monkeypatch.context() as env:
        env.setenv("CLAIMLOG_SIGNING_KEY", str(key_file))
        done = claimlog("backup", str(directory), nats_url=server.url_for("admin"), cwd=cwd)
    assert done.returncode == 0, done.stderr
    return directory


def manifest_of(backup: Path) -> dict:
    return json.loads((backup / "manifest.json").read_text())


def rewrite(backup: Path, manifest: dict, *, digests: bool = True) -> None:
    """Write the manifest back, its digests recomputed as a tamperer would."""
    if digests:
        manifest["files"] = {name: hashlib.sha256((backup / name).read_bytes()).hexdigest() for name in manifest["files"]}
    (backup / "manifest.json").write_text(json.dumps(manifest))


def refused(result, *reasons: str) -> None:
    said = " ".join(result.stderr.split())
    assert result.returncode == 1, said
    assert "nothing was restored" in said
    for reason in reasons:
        assert reason in said, said


@pytest.fixture
def backup(servers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    source, _, _ = servers
    asyncio.run(signed_registry(source.url_for("admin"), tmp_path / "api.pem"))
    added = claimlog("actors", "add", "ada", "--kind", "person", nats_url=source.url_for("admin"), cwd=tmp_path)
    assert added.returncode == 0, added.stderr  # the registry's token store
    return backed_up(source, tmp_path / "api.pem", tmp_path / "backup", tmp_path, monkeypatch)


async def fresh_head(fresh: EmbeddedNats) -> int:
    nc = await connect(fresh.url_for("admin"))
    try:
        return await ClaimLog(nc, StreamSpec("CLAIMS")).head()
    finally:
        await nc.close()


def test_a_signed_backup_restores_and_says_who_signed_it(servers, backup: Path, tmp_path: Path):
    _, _, fresh = servers
    manifest = manifest_of(backup)
    assert manifest["signature"]["key_id"] and manifest["findings"] == {}
    restored = claimlog("restore", str(backup), "--key-to", str(tmp_path / "api.pem"), nats_url=fresh.url_for("admin"), cwd=tmp_path)
    assert restored.returncode == 0, restored.stderr
    assert "unsigned" not in restored.stderr


async def test_a_key_file_outside_the_backup_is_never_read_nor_written_outside_the_data_directory(servers, backup: Path, tmp_path: Path):
    _, _, fresh = servers
    data = tmp_path / ".claimlog"
    data.mkdir(exist_ok=True)
    (data / "nats-users.json").write_text('{"admin": "secret"}')
    target = tmp_path / "pwned" / "evil-cron"
    manifest = manifest_of(backup)
    manifest["keys"] = [{"file": f"../{'../' * len(backup.parts)}{data}/nats-users.json", "path": str(target)}]
    rewrite(backup, manifest)
    refused(claimlog("restore", str(backup), nats_url=fresh.url_for("admin"), cwd=tmp_path), "relative paths inside it")

    (backup / "keys" / "evil").write_bytes(b"* * * * * attacker")
    manifest["keys"] = [{"file": "keys/evil", "path": str(target)}]
    manifest["files"]["keys/evil"] = ""
    rewrite(backup, manifest)
    refused(claimlog("restore", str(backup), nats_url=fresh.url_for("admin"), cwd=tmp_path),
            "the manifest's signature", "does not verify")
    (backup / "keys" / "link").symlink_to(data / "nats-users.json")
    manifest["keys"] = [{"file": "keys/link", "path": str(data / "copied")}]
    rewrite(backup, manifest)
    refused(claimlog("restore", str(backup), nats_url=fresh.url_for("admin"), cwd=tmp_path), "leads outside the backup")
    assert not target.exists() and not (data / "copied").exists() and await fresh_head(fresh) == 0


async def test_a_key_path_outside_the_data_directory_needs_the_operator_to_name_it(servers, backup: Path, tmp_path: Path):
    _, _, fresh = servers
    (tmp_path / "api.pem").unlink()  # the key the backup holds, missing where it was
    refused(claimlog("restore", str(backup), nats_url=fresh.url_for("admin"), cwd=tmp_path),
            f"to {tmp_path / 'api.pem'}, outside the data directory", "--key-to")
    assert not (tmp_path / "api.pem").exists() and await fresh_head(fresh) == 0


async def test_a_swapped_in_foreign_token_store_is_refused(servers, backup: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    _, other, fresh = servers
    await signed_registry(other.url_for("admin"), tmp_path / "other.pem")
    added = claimlog("actors", "add", "mallory", "--kind", "person", nats_url=other.url_for("admin"), cwd=tmp_path)
    assert added.returncode == 0, added.stderr
    foreign = backed_up(other, tmp_path / "other.pem", tmp_path / "foreign", tmp_path, monkeypatch)
    for suffix in ("json", "snapshot"):
        name = f"buckets/claimlog_actors.{suffix}"
        shutil.copyfile(foreign / name, backup / name)
    swapped = claimlog("restore", str(backup), nats_url=fresh.url_for("admin"), cwd=tmp_path)
    refused(swapped, "buckets/claimlog_actors.", "is not the file the backup wrote")
    rewrite(backup, manifest_of(backup))  # the digests recomputed too: the manifest's signature no longer holds
    refused(claimlog("restore", str(backup), nats_url=fresh.url_for("admin"), cwd=tmp_path), "signature", "does not verify")
    assert await fresh_head(fresh) == 0


async def test_an_edited_log_line_with_its_hash_recomputed_is_refused(servers, backup: Path, tmp_path: Path):
    _, _, fresh = servers
    lines = (backup / "log.jsonl").read_text().splitlines()
    edited = json.loads(lines[2])
    edited["event"] = edited["event"].replace("2026", "2025", 1)
    edited["hash"] = hashlib.sha256(edited["event"].encode()).hexdigest()
    lines[2] = json.dumps(edited)
    (backup / "log.jsonl").write_text("\n".join(lines) + "\n")
    manifest = manifest_of(backup)
    del manifest["signature"]  # the tamperer cannot sign: an unsigned manifest, its digests made to match
    rewrite(backup, manifest)
    refused(claimlog("restore", str(backup), nats_url=fresh.url_for("admin"), cwd=tmp_path),
            "sequence 3", "does not verify over the stored bytes", "does not hold against its own key registry")
    assert await fresh_head(fresh) == 0


async def test_a_backup_restores_over_what_a_first_start_made_in_an_empty_registry(servers, backup: Path, tmp_path: Path):
    _, _, fresh = servers
    data = tmp_path / ".claimlog"
    trust = await ensure_trust(Settings(nats_url=fresh.url_for("admin"), data_dir=data))
    assert trust.required_after == 0 and trust.key_file == data / "delegate-key.pem"
    restored = claimlog("restore", str(backup), "--key-to", str(tmp_path / "api.pem"), nats_url=fresh.url_for("admin"), cwd=tmp_path)
    assert restored.returncode == 0, restored.stderr
    assert "kept this registry's own delegate key" in " ".join(restored.stderr.split())
    nc = await connect(fresh.url_for("admin"))
    try:
        keys = await (await KeyRing.open(nc)).records()
    finally:
        await nc.close()
    own = [Signer.from_file(tmp_path / "api.pem").key_id, Signer.from_file(trust.key_file).key_id]
    assert [key.key_id for key in keys] == own  # the backup's, and the one the running API signs with
