"""A restore or import that stopped half-way (killed, or refused) continues from where the stream ends, once
it has checked that what the stream holds is the start of the same log, event for event; a stream holding
the whole log, or anything else, is refused and left as it was; a failed one prints the command that resumes it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.audit.export import read_export
from services.identity.actors import BUCKET
from services.log import ClaimLog, StreamSpec, connect
from services.log.restore import Republisher
from services.runtime.embedded import EmbeddedNats
from tests.conftest import random_claim_id
from tests.integration.audit_log import claimlog, publish_raw
from tests.integration.restoring import exact, killed_at_its_first_event, resume_command, write_interleaved
from tests.integration.test_backup import token_actor, whole_log

pytestmark = pytest.mark.private_nats
DEADLINE = 60.0


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[tuple[EmbeddedNats, EmbeddedNats]]:
    """The registry's server, and a fresh one to restore into."""
    with EmbeddedNats(tmp_path / "source") as source, EmbeddedNats(tmp_path / "fresh") as fresh:
        yield source, fresh


async def source_log(url: str, *, rounds: int = 25) -> list[tuple]:
    nc = await connect(url)
    try:
        claim_log = ClaimLog(nc, StreamSpec("CLAIMS"))
        await claim_log.ensure()
        await write_interleaved(claim_log, claims=200, rounds=rounds)
        return exact(await whole_log(claim_log))
    finally:
        await nc.close()


async def held(url: str, stream: str = "CLAIMS") -> tuple[list[tuple], dict[str, int]]:
    """The log on the server at ``url``, and how many revisions each key-value bucket holds."""
    nc = await connect(url)
    try:
        log = exact(await whole_log(ClaimLog(nc, StreamSpec(stream))))
        buckets = {i.config.name: i.state.messages for i in await nc.jetstream().streams_info() if i.config.name.startswith("KV_")}
        return log, buckets
    finally:
        await nc.close()


async def test_a_restore_killed_half_way_resumes_to_an_exact_copy_and_a_third_run_changes_nothing(servers, tmp_path: Path):
    source, fresh = servers
    added = claimlog("actors", "add", "ada", "--kind", "person", nats_url=source.url_for("admin"), cwd=tmp_path)
    assert added.returncode == 0, added.stderr
    token = added.stdout.strip().splitlines()[-1]
    log = await source_log(source.url_for("admin"))
    backup = tmp_path / "backup"
    assert claimlog("backup", str(backup), nats_url=source.url_for("admin"), cwd=tmp_path).returncode == 0

    settings = {"CLAIMLOG_NATS_URL": fresh.url_for("admin"), "CLAIMLOG_DATA_DIR": str(tmp_path / ".claimlog")}
    await killed_at_its_first_event(["restore", str(backup)], env=settings, cwd=tmp_path, deadline=DEADLINE)
    stopped, _ = await held(fresh.url_for("admin"))
    assert 0 < len(stopped) < len(log) and stopped == log[: len(stopped)]

    resumed = claimlog("restore", str(backup), nats_url=fresh.url_for("admin"), cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{len(stopped)} were already there" in resumed.stderr
    after = await held(fresh.url_for("admin"))
    assert after[0] == log and after[1][f"KV_{BUCKET}"] == 1
    assert await token_actor(fresh.url_for("admin"), token) == "ada"

    again = claimlog("restore", str(backup), nats_url=fresh.url_for("admin"), cwd=tmp_path)
    assert again.returncode == 1 and "already holds all" in again.stderr and "nothing was restored" in again.stderr
    assert await held(fresh.url_for("admin")) == after


async def test_an_import_refused_half_way_prints_the_command_that_resumes_it_to_an_exact_copy(servers, tmp_path: Path):
    source, fresh = servers
    await source_log(source.url_for("admin"), rounds=7)
    await publish_raw(source.url_for("admin"), f"claims.{random_claim_id()}.ClaimDrafted", b"x" * 20_000)  # sequence 1,401
    log = await source_log(source.url_for("admin"), rounds=3)
    exported = tmp_path / "log.jsonl"
    assert claimlog("export", "--out", str(exported), nats_url=source.url_for("admin"), cwd=tmp_path).returncode == 0
    nc = await connect(fresh.url_for("admin"))
    try:  # a stream that takes no message of 20 kB: the batch holding sequence 1,401 is refused whole
        await ClaimLog(nc, StreamSpec("CLAIMS")).ensure()
        config = (await nc.jetstream().stream_info("CLAIMS")).config
        config.max_msg_size = 10_000
        await nc.jetstream().update_stream(config)
        failed = claimlog("import", str(exported), "--window", "64", nats_url=fresh.url_for("admin"), cwd=tmp_path)
        said = " ".join(failed.stderr.split())  # as Rich wrapped it
        assert failed.returncode == 1 and "import failed: the batch of sequences 1001 to 2000 was refused" in said, said
        assert "the stream now ends at 1000" in said
        assert resume_command(failed.stderr) == ["import", str(exported.resolve()), "--window", "64"]
        config.max_msg_size = -1
        await nc.jetstream().update_stream(config)
    finally:
        await nc.close()

    resumed = claimlog(*resume_command(failed.stderr), nats_url=fresh.url_for("admin"), cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert f"imported {len(log) - 1000} events at sequences 1001 to {len(log)}" in resumed.stderr
    assert (await held(fresh.url_for("admin")))[0] == log


async def test_an_import_into_a_stream_holding_other_events_is_refused_naming_the_first_difference(servers, tmp_path: Path):
    source, fresh = servers
    log = await source_log(source.url_for("admin"), rounds=10)
    exported = tmp_path / "log.jsonl"
    assert claimlog("export", "--out", str(exported), nats_url=source.url_for("admin"), cwd=tmp_path).returncode == 0
    nc = await connect(fresh.url_for("admin"))
    try:  # the first 1,200 events restored, then the file edited at line 700 (its hash recomputed)
        claim_log = ClaimLog(nc, StreamSpec("CLAIMS"))
        await claim_log.ensure()
        async with Republisher(nc, "CLAIMS") as republisher:
            for _, event in list(read_export(exported))[:1200]:
                await republisher.publish(event)
    finally:
        await nc.close()
    lines = [json.loads(line) for line in exported.read_text().splitlines()]
    lines[699]["event"] = lines[699]["event"].replace("validates", "refutes")
    lines[699]["hash"] = hashlib.sha256(lines[699]["event"].encode()).hexdigest()
    exported.write_text("".join(json.dumps(line) + "\n" for line in lines))

    edited = claimlog("import", str(exported), nats_url=fresh.url_for("admin"), cwd=tmp_path)
    said = " ".join(edited.stderr.split())  # as Rich wrapped it
    assert edited.returncode == 1 and "nothing was published" in said
    assert f"sequence 700 is not the event at {exported}:700 (its bytes differ)" in said, said
    assert (await held(fresh.url_for("admin")))[0] == log[:1200]



async def test_a_registry_whose_token_store_holds_other_tokens_is_not_restored_into(servers, tmp_path: Path):
    source, fresh = servers
    for server, name in ((source, "ada"), (fresh, "bob")):  # one revision each: the same count, other tokens
        added = claimlog("actors", "add", name, "--kind", "person", nats_url=server.url_for("admin"), cwd=tmp_path)
        assert added.returncode == 0, added.stderr
    await source_log(source.url_for("admin"), rounds=1)
    backup = tmp_path / "backup"
    assert claimlog("backup", str(backup), nats_url=source.url_for("admin"), cwd=tmp_path).returncode == 0
    before = await held(fresh.url_for("admin"))

    refused = claimlog("restore", str(backup), nats_url=fresh.url_for("admin"), cwd=tmp_path)
    said = " ".join(refused.stderr.split())
    assert refused.returncode == 1 and f"bucket {BUCKET} is not empty and is not the backup's" in said, said
    assert "nothing was restored" in said and await held(fresh.url_for("admin")) == before
