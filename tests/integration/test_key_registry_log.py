"""The key registry's history is the log's: every change (a key added, rotated, the requirement set) is a
message of the claim stream on the registry's reserved subject, the bucket a cache of it, and every reader of
claim events passes these messages as registry facts (real nats-server, SQLite and PostgreSQL)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import Engine, func, select

from events import Actor
from events.key_registry import KeyAdded, KeyRetired, SigningRequired, decode_change
from events.log_entry import decode_entry, encode_entry, from_message
from events.subjects import REGISTRY
from projections.registry import build_projections
from projections.tables import checkpoints, unreadable_events
from services.admission import Gate, RegistryFact
from services.admission.registry import attribution_from_log
from services.audit.verify import Report, check_log
from services.identity.keys import KeyDocument, KeyRecord, KeyRegistryError, KeyRing
from services.log import ClaimLog, ConflictError, StreamSpec
from services.log.registry_log import append_changes, read_registry
from services.log.signing import Signer, public_text
from services.projector import Projector
from services.projector.applied import applied
from services.read_api.queries import claim_page
from services.timeline.history import claim_history
from tests.builders import BOT, PERSON, attached, drafted
from tests.conftest import random_claim_id
from tests.integration.test_divided_checkpoints import publish_claims, run_halves

API = Actor(id="claimlog-api", kind="service")


async def _verified(claim_log: ClaimLog) -> Report:
    report = Report()
    await check_log(claim_log, report, head=await claim_log.head())
    return report


async def _registry_changed(claim_log: ClaimLog) -> tuple[KeyRing, ClaimLog]:
    """A registry with a delegate and a producer, the producer's key rotated and signatures required, a
    claim written before and one after; the ring and the log signed by the API's delegate key."""
    ring = await KeyRing.open(claim_log.nc, stream=claim_log.stream, layout=claim_log.layout)
    early = random_claim_id()
    await claim_log.append(early, [drafted(early, actor=PERSON)], expected_seq=0, prev_hash=None)
    api, _ = await ring.add(API, delegate=True)
    await ring.add(BOT)
    await ring.rotate(BOT.id, after_seq=await claim_log.head())
    await ring.require(await claim_log.head())
    signed = ClaimLog(claim_log.nc, StreamSpec(claim_log.stream), signer=api)
    late = random_claim_id()
    await signed.append(late, [drafted(late, actor=PERSON), attached(late, "s1", actor=PERSON)], expected_seq=0, prev_hash=None)
    return ring, signed


async def test_every_key_change_is_in_the_log_in_order_and_the_bucket_is_what_the_log_gives(claim_log: ClaimLog):
    ring, _ = await _registry_changed(claim_log)
    log = await read_registry(claim_log.nc, claim_log.stream, layout=claim_log.layout)
    assert [type(c) for c in log.changes] == [KeyAdded, KeyAdded, KeyAdded, KeyRetired, SigningRequired]
    assert [s.seq for s in log.stored] == [2, 3, 4, 5, 6]  # after the first claim's draft, before the signed claim
    assert all(s.subject == claim_log.layout.stored_subject(REGISTRY, c.type) for s, c in zip(log.stored, log.changes, strict=True))
    added, rotated_in, retired = log.changes[1], log.changes[2], log.changes[3]
    assert (added.actor, rotated_in.actor, retired.key_id, retired.retired_after) == (BOT, BOT, added.key_id, 3)
    assert log.changes[4].required_after == 5
    # each change chains to the one before, as a claim's events do
    assert [c.prev_hash for c in log.changes] == [None, *(s.hash for s in log.stored[:-1])]

    rebuilt = attribution_from_log(log.changes)
    cached = await ring.attribution()
    assert rebuilt.keys == cached.keys and rebuilt.required_after == cached.required_after == 5
    _, logged = await ring.logged()
    assert logged == await ring.document()


async def test_the_attribution_rebuilt_from_the_log_judges_every_message_as_the_registrys_gate(claim_log: ClaimLog):
    await _registry_changed(claim_log)
    stored = await claim_log.read_log(after_seq=0, limit=100)
    # what an outsider holds: the transparency log's entries of every stored message, nothing else
    entries = [decode_entry(encode_entry(from_message(s.subject, s.stored_at, s.signature, s.data))) for s in stored]
    changes = [decode_change(entry.body) for entry in entries if entry.claim_id == REGISTRY]
    assert changes == [v.event for v in map(Gate().stored, stored) if isinstance(v, RegistryFact)]
    ours = Gate(attribution_from_log(changes))
    theirs = Gate(await _bucket_attribution(claim_log))
    assert [ours.stored(s) for s in stored] == [theirs.stored(s) for s in stored]
    assert sum(isinstance(ours.stored(s), RegistryFact) for s in stored) == 5


async def _bucket_attribution(claim_log: ClaimLog):
    ring = await KeyRing.maybe_open(claim_log.nc, stream=claim_log.stream, layout=claim_log.layout)
    return await ring.attribution()


async def test_of_two_admins_changing_the_registry_at_once_one_is_refused(claim_log: ClaimLog):
    ring = await KeyRing.open(claim_log.nc, stream=claim_log.stream, layout=claim_log.layout)
    await ring.add(API, delegate=True)
    stale = await read_registry(claim_log.nc, claim_log.stream, layout=claim_log.layout)
    await ring.add(BOT)  # the other admin, after this one read the registry
    required = SigningRequired(event_id="0193f000-0000-7000-8000-000000000001", occurred_at=stale.changes[0].occurred_at, required_after=0)
    with pytest.raises(ConflictError):
        await append_changes(claim_log.nc, claim_log.stream, [required], after=stale, layout=claim_log.layout)
    assert await claim_log.head() == 2 and (await ring.document()).required_after is None


async def test_a_bucket_edited_behind_the_logs_back_is_named_by_verify(claim_log: ClaimLog):
    ring, _ = await _registry_changed(claim_log)
    report = await _verified(claim_log)
    assert report.ok, report.findings
    assert report.registry_changes == 5 and report.claims == 2 and report.unsigned == 1

    document = await ring.document()
    forged = document.keys[1].model_copy(update={"retired_at": None, "retired_after": None})  # the rotated-out key made current again
    await ring._kv.put("keys", KeyDocument(keys=[document.keys[0], forged, *document.keys[2:]],
                                           required_after=document.required_after,
                                           required_set_at=document.required_set_at).model_dump_json().encode())
    report = await _verified(claim_log)
    assert [f.kind for f in report.findings] == ["registry"]
    assert f"key {forged.key_id} of {BOT.id} differs" in report.findings[0].message
    assert "retired_after: log 3, bucket None" in report.findings[0].message
    assert await ring.sync() == (await ring.logged())[1]  # the next change (or a sync) writes the log's word back
    assert (await _verified(claim_log)).ok


async def test_the_projector_and_a_claims_history_pass_the_registrys_changes(claim_log: ClaimLog, engine: Engine):
    ring, signed = await _registry_changed(claim_log)
    await ring.add(Actor(id="late-bot", kind="service"))  # the log's last message is the registry's
    head = await claim_log.head()
    assert (await read_registry(claim_log.nc, claim_log.stream, layout=claim_log.layout)).last_seq == head
    # the whole log's position reaches the registry's last change: every event folded
    projector = Projector(claim_log, engine, build_projections(), name="projector", batch=2)
    await projector.run_until(head)
    assert projector.checkpoint == head
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(unreadable_events)).scalar_one() == 0
        pages = [page for page in (claim_page(conn, c) for c in await _claims(claim_log)) if page is not None]
    assert sorted(page.event_count for page in pages) == [1, 2]
    for claim in await _claims(claim_log):
        entries = claim_history(claim, await claim_log.read_claim(claim), gate=Gate(await ring.attribution()))
        assert entries and all(entry.unreadable is None for entry in entries)


async def _claims(claim_log: ClaimLog) -> list[str]:
    stored = await claim_log.read_log(after_seq=0, limit=100)
    return sorted({claim_log.layout.claim_of(s.subject) for s in stored} - {REGISTRY})


async def test_a_registry_made_before_the_log_kept_its_changes_is_recorded_once(claim_log: ClaimLog):
    ring = await KeyRing.open(claim_log.nc, stream=claim_log.stream, layout=claim_log.layout)
    old = KeyDocument.model_validate({
        "keys": [{"key_id": "0" * 32, "actor": API.model_dump(), "public_key": "A" * 43, "delegate": True,
                  "added_at": "2026-01-01T00:00:00Z", "retired_at": "2026-02-01T00:00:00Z"}],  # retired before sequences were kept
        "required_after": 0, "required_set_at": "2026-01-01T00:00:01Z",
    })
    await ring._kv.put("keys", old.model_dump_json().encode())
    assert not (await _verified(claim_log)).ok  # keys in the bucket, none in the log

    assert await ring.record_if_missing() == old
    assert await ring.record_if_missing() is None  # once
    log = await read_registry(claim_log.nc, claim_log.stream, layout=claim_log.layout)
    assert [c.type for c in log.changes] == ["RegistryRecorded"] and (await ring.logged())[1] == old
    with pytest.raises(KeyRegistryError, match="already required"):
        await ring.require(0)
    _, record = await ring.add(BOT)
    assert (await ring.records())[-1] == record and (await _verified(claim_log)).ok


async def test_a_start_records_a_registry_made_before_the_log_kept_its_changes_once_and_says_so(
    nats_url: str, claim_log: ClaimLog, tmp_path
):
    from services.orchestration.trust import ensure_trust
    from services.runtime.settings import Settings

    claim = random_claim_id()
    await claim_log.append(claim, [drafted(claim, actor=PERSON)], expected_seq=0, prev_hash=None)
    ring = await KeyRing.open(claim_log.nc, stream=claim_log.stream, layout=claim_log.layout)
    bot = Signer.generate()
    old = KeyDocument(keys=[KeyRecord(key_id=bot.key_id, actor=BOT, public_key=public_text(bot.public_key), added_at=datetime(2026, 1, 1, tzinfo=UTC))])
    await ring._kv.put("keys", old.model_dump_json().encode())  # as a registry before this release kept it

    settings = Settings(nats_url=nats_url, data_dir=tmp_path / "data", signing_key=None)
    first = await ensure_trust(settings)
    assert first.recorded == 1 and first.key_file is None and first.required_after is None
    again = await ensure_trust(settings)
    assert again.recorded is None
    log = await read_registry(claim_log.nc, claim_log.stream, layout=claim_log.layout)
    assert [c.type for c in log.changes] == ["RegistryRecorded"] and log.last_seq == 2
    assert (await ring.logged())[1] == old == await ring.document()
    assert (await _verified(claim_log)).ok


async def test_runners_of_partitions_reach_the_head_when_the_registrys_change_is_the_logs_last_message(
    claim_log: ClaimLog, engine: Engine
):
    """The registry's changes lie in the partition its token hashes to: that partition's runner moves its
    checkpoint past them, so the registry-wide position (every partition applied through it) is the head."""
    await publish_claims(claim_log, count=4)
    ring = await KeyRing.open(claim_log.nc, stream=claim_log.stream, layout=claim_log.layout)
    await ring.add(API, delegate=True)
    await ring.add(BOT)
    head = await claim_log.head()
    registry_partition = claim_log.layout.partition_of(REGISTRY)
    assert (await read_registry(claim_log.nc, claim_log.stream, layout=claim_log.layout)).last_seq == head
    await run_halves(claim_log, engine)  # until every projection's position is the head
    now = await applied(claim_log, engine)
    assert set(now.positions.values()) == {head}
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(unreadable_events)).scalar_one() == 0
        at = conn.execute(select(func.max(checkpoints.c.last_seq)).where(checkpoints.c.partition == registry_partition)).scalar_one()
    assert at == head  # the registry's partition's checkpoint stands at its last change


async def test_the_key_commands_append_their_changes_in_order_and_verify_finds_the_bucket_as_the_log_says(
    nats_url: str, claim_log: ClaimLog, tmp_path
):
    from tests.integration.audit_log import claimlog, verify_json

    claim = random_claim_id()
    await claim_log.append(claim, [drafted(claim, actor=PERSON)], expected_seq=0, prev_hash=None)
    for args in (("add", "claimlog-api", "--delegate", "--out", str(tmp_path / "api.pem")),
                 ("add", BOT.id, "--out", str(tmp_path / "bot.pem")),
                 ("rotate", BOT.id, "--out", str(tmp_path / "bot-2.pem")),
                 ("require",)):
        done = claimlog("actors", "key", *args, nats_url=nats_url, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    log = await read_registry(claim_log.nc, claim_log.stream, layout=claim_log.layout)
    assert [c.type for c in log.changes] == ["KeyAdded", "KeyAdded", "KeyAdded", "KeyRetired", "SigningRequired"]
    assert (log.changes[3].retired_after, log.changes[4].required_after) == (3, 5)  # each after the log's head as it ran
    refused = claimlog("actors", "key", "require", nats_url=nats_url, cwd=tmp_path)
    assert refused.returncode == 2 and "already required after sequence 5" in refused.stderr
    assert await claim_log.head() == 6  # a refused change appends nothing
    code, report = verify_json("--skip-tables", nats_url=nats_url, cwd=tmp_path)
    assert code == 0 and report["registry_changes"] == 5 and report["findings"] == []
