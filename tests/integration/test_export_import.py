"""``claimlog export`` and ``claimlog import``: a restored log is the same log, byte for byte, and folds into
the same read models; a bad file or a non-empty stream publishes nothing; a modified backup is caught."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest
from sqlalchemy import Engine

from events import encode
from events.subjects import DEFAULT_LAYOUT, claim_of, event_subject
from projections.checksum import table_checksums
from services.log import ClaimLog, PublishError, StoredEvent, StreamSpec, connect
from services.log.restore import Republisher, RestoredEvent
from services.rebuild.replay import rebuild_generation
from services.runtime.db import make_engine, upgrade
from services.runtime.embedded import EmbeddedNats
from services.runtime.settings import Settings
from services.store.generations import Generations
from tests.builders import attached, drafted
from tests.conftest import random_claim_id, second_database
from tests.integration.audit_log import claimlog, project, publish_raw, verify_json, write_claims


@pytest.fixture
def fresh_nats(tmp_path: Path) -> Iterator[str]:
    """A second nats-server with an empty store (the stream is created by the import)."""
    server = EmbeddedNats(tmp_path / "nats-restored", sync="always")
    server.start()
    yield server.url_for("admin")
    server.stop()


async def _whole_log(claim_log: ClaimLog) -> list[StoredEvent]:
    stored, after = [], 0
    while page := await claim_log.read_log(after_seq=after, limit=500):
        stored.extend(page)
        after = page[-1].seq
    return stored


def _identity(stored: list[StoredEvent]) -> list[tuple]:
    return [(s.seq, s.subject, s.hash, s.msg_id, s.stored_at) for s in stored]


async def test_an_exported_log_imported_into_a_fresh_server_is_the_same_log_and_the_same_read_models(
    nats_url: str, fresh_nats: str, claim_log: ClaimLog, engine: Engine, database_url: str, tmp_path: Path
):
    claims = await write_claims(claim_log)
    # Bytes that are not even UTF-8 must come back as they were too.
    await publish_raw(nats_url, event_subject(claims[0], "ClaimDrafted"), b"\xff{not json")
    head = await project(claim_log, engine)
    exported = tmp_path / "log.jsonl"
    done = claimlog("export", "--out", str(exported), nats_url=nats_url, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in exported.read_text().splitlines()]
    assert [line["seq"] for line in lines] == list(range(1, head + 1))
    assert "event_b64" in lines[-1] and all("event" in line for line in lines[:-1])

    # A file altered without fixing its hash is refused by line, before anything is published.
    tampered = tmp_path / "tampered.jsonl"
    bad = [dict(line) for line in lines]
    bad[2]["event"] = bad[2]["event"].replace("Statement", "statement")
    tampered.write_text("".join(json.dumps(line) + "\n" for line in bad))
    refused = claimlog("import", str(tampered), nats_url=fresh_nats, cwd=tmp_path)
    assert refused.returncode == 1 and f"{tampered}:3:" in refused.stderr and "nothing was published" in refused.stderr

    imported = claimlog("import", str(exported), nats_url=fresh_nats, cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    assert f"imported {head} events at sequences 1 to {head}" in imported.stderr
    nc, replaying = await connect(fresh_nats), await nats.connect(fresh_nats)
    try:
        restored = ClaimLog(nc, StreamSpec("CLAIMS"))
        assert _identity(await _whole_log(restored)) == _identity(await _whole_log(claim_log))
        for second_url in second_database(database_url, tmp_path):
            second = make_engine(second_url)
            upgrade(second)
            try:
                # Folded on a plain nats-py connection (every header parsed by nats-py)...
                assert await project(ClaimLog(replaying, StreamSpec("CLAIMS")), second) == head
                with engine.connect() as a, second.connect() as b:
                    assert table_checksums(b) == table_checksums(a)
                # ... and on claimlog's own (each header looked up as sent), in verify's fresh replay.
                code, report = verify_json(nats_url=fresh_nats, database_url=second_url, cwd=tmp_path)
                assert [f["kind"] for f in report["findings"]] == ["unreadable"] and report["tables_at_seq"] == head
                # ... and in a parallel rebuild, whose reader hands each worker the restored store times.
                settings = Settings(nats_url=fresh_nats, database_url=second_url, data_dir=tmp_path / "data")
                generations = Generations(second_url)
                try:
                    rebuilt = await rebuild_generation(settings, generations, workers=2, parallel_from=0)
                    with engine.connect() as a, generations.engine(rebuilt.generation).connect() as b:
                        assert table_checksums(b) == table_checksums(a)
                finally:
                    generations.close()
            finally:
                second.dispose()
    finally:
        await nc.close()
        await replaying.close()

    again = claimlog("import", str(exported), nats_url=fresh_nats, cwd=tmp_path)
    assert again.returncode == 1 and "is not empty" in again.stderr


async def test_a_claims_export_holds_exactly_that_claims_events(nats_url: str, claim_log: ClaimLog, tmp_path: Path):
    claims = await write_claims(claim_log, count=3)
    out = tmp_path / "one.jsonl"
    done = claimlog("export", "--claim", claims[1], "--out", str(out), nats_url=nats_url, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    history = await claim_log.read_claim(claims[1])
    assert [(line["seq"], line["subject"], line["hash"]) for line in lines] == [(s.seq, s.subject, s.hash) for s in history]
    assert all(hashlib.sha256(line["event"].encode()).hexdigest() == line["hash"] for line in lines)


async def test_a_stream_restored_from_a_modified_backup_fails_verify_at_the_next_event_of_that_claim(
    nats_url: str, fresh_nats: str, claim_log: ClaimLog, tmp_path: Path
):
    claims = await write_claims(claim_log, count=2)
    exported = tmp_path / "log.jsonl"
    assert claimlog("export", "--out", str(exported), nats_url=nats_url, cwd=tmp_path).returncode == 0
    lines = [json.loads(line) for line in exported.read_text().splitlines()]
    # Someone edits an event of claims[0] in the backup and recomputes its hash, so the file itself checks out.
    edited = next(i for i, line in enumerate(lines) if line["subject"] == DEFAULT_LAYOUT.stored_subject(claims[0], "SourceAttached"))
    lines[edited]["event"] = lines[edited]["event"].replace("Measured", "Invented")
    lines[edited]["hash"] = hashlib.sha256(lines[edited]["event"].encode()).hexdigest()
    exported.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert claimlog("import", str(exported), nats_url=fresh_nats, cwd=tmp_path).returncode == 0

    code, report = verify_json("--skip-tables", nats_url=fresh_nats, cwd=tmp_path)
    following = next(line for line in lines[edited + 1 :] if claim_of(line["subject"]) == claims[0])
    assert code == 1
    assert [(f["kind"], f["claim_id"], f["seq"]) for f in report["findings"]] == [("chain", claims[0], following["seq"])]


async def test_a_restore_meeting_a_claim_that_already_has_events_stores_nothing_of_that_batch_and_says_why(claim_log: ClaimLog):
    # `claimlog import` refuses a stream that is not empty before it publishes anything (above); a writer
    # that appends between that check and the restore's batch is caught by the batch's expected sequences.
    moved, untouched = random_claim_id(), random_claim_id()
    await claim_log.append(moved, [drafted(moved)], expected_seq=0, prev_hash=None)
    exported = [drafted(moved), attached(moved, "s1"), drafted(untouched)]
    with pytest.raises(PublishError, match=r"was refused: wrong last sequence: 1 \(err_code 10071\)"):
        async with Republisher(claim_log.nc, claim_log.stream, layout=claim_log.layout) as republisher:
            for event in exported:
                await republisher.publish(RestoredEvent(event.claim_id, event.type, encode(event), event.event_id, "2026-12-01T10:00:00Z"))
    assert await claim_log.head() == 1
    assert [stored.seq for stored in await claim_log.read_claim(moved)] == [1]
    assert await claim_log.read_claim(untouched) == []


async def test_events_stored_without_a_message_id_come_back_without_one_even_when_they_repeat_an_event_id(
    nats_url: str, fresh_nats: str, claim_log: ClaimLog, tmp_path: Path
):
    claim = random_claim_id()
    await claim_log.append(claim, [drafted(claim)], expected_seq=0, prev_hash=None)
    repeated = encode(attached(claim, "s1"))
    for _ in range(2):  # a producer past services.log: no message id, the same event twice
        await publish_raw(nats_url, event_subject(claim, "SourceAttached"), repeated)
    exported = tmp_path / "log.jsonl"
    assert claimlog("export", "--out", str(exported), nats_url=nats_url, cwd=tmp_path).returncode == 0

    imported = claimlog("import", str(exported), nats_url=fresh_nats, cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    nc = await connect(fresh_nats)
    try:
        restored = await _whole_log(ClaimLog(nc, StreamSpec("CLAIMS")))
    finally:
        await nc.close()
    assert _identity(restored) == _identity(await _whole_log(claim_log))
    assert [s.msg_id is None for s in restored] == [False, True, True]


async def test_an_exported_log_brings_its_key_registry_and_an_import_takes_the_logs_word_for_it(
    nats_url: str, fresh_nats: str, claim_log: ClaimLog, tmp_path: Path
):
    """The key registry's changes are messages of the log: exported and imported byte for byte, folded into the
    imported registry's bucket, and the signed events after the requirement are judged against them."""
    from events import Actor
    from services.identity.keys import KeyRing

    ring = await KeyRing.open(claim_log.nc, stream=claim_log.stream, layout=claim_log.layout)
    api, _ = await ring.add(Actor(id="claimlog-api", kind="service"), delegate=True)
    await ring.require(await claim_log.head())
    claim = random_claim_id()
    signed = ClaimLog(claim_log.nc, StreamSpec("CLAIMS"), signer=api)
    await signed.append(claim, [drafted(claim), attached(claim, "s1")], expected_seq=0, prev_hash=None)
    exported = tmp_path / "log.jsonl"
    assert claimlog("export", "--out", str(exported), nats_url=nats_url, cwd=tmp_path).returncode == 0

    imported = claimlog("import", str(exported), nats_url=fresh_nats, cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    assert "unsigned" not in imported.stderr  # the registry's own changes are not unsigned claim events
    nc = await connect(fresh_nats)
    try:
        restored = ClaimLog(nc, StreamSpec("CLAIMS"))
        assert _identity(await _whole_log(restored)) == _identity(await _whole_log(claim_log))
        assert await (await KeyRing.open(nc)).document() == await ring.document()
    finally:
        await nc.close()
    code, report = verify_json("--skip-tables", nats_url=fresh_nats, cwd=tmp_path)
    assert code == 0 and report["findings"] == [] and report["registry_changes"] == 2
