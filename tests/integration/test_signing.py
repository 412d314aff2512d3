"""Signed appends on a real nats-server: keys in the registry, one signature per append or batch, and
``verify`` naming every event that is unsigned, mis-signed or signed by a key that may not speak for its actor."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, select

from events import Actor, encode
from projections.registry import build_projections
from projections.tables import unreadable_events
from services.audit.export import _parse, export_line
from services.audit.verify import Report, check_log
from services.identity.keys import KeyRing
from services.log import ClaimLog, StreamSpec
from services.log.batches import AtomicBatches, ClaimShare
from services.log.chain import chain
from services.log.signing import SIGNATURE, Signer
from services.projector import Projector
from services.read_api.queries import claim_page
from tests.builders import BOT, PERSON, attached, drafted, reviewed
from tests.builders.raw import publish_raw
from tests.conftest import random_claim_id

API = Actor(id="claimlog-api", kind="service")


async def _report(claim_log: ClaimLog) -> Report:
    report = Report()
    await check_log(claim_log, report, head=await claim_log.head())
    return report


async def test_signed_appends_verify_and_older_unsigned_events_are_counted_not_reported(claim_log: ClaimLog):
    old = random_claim_id()
    await claim_log.append(old, [drafted(old, actor=PERSON)], expected_seq=0, prev_hash=None)  # before any key
    ring = await KeyRing.open(claim_log.nc, stream=claim_log.stream)
    api, _ = await ring.add(API, delegate=True)
    bot, _ = await ring.add(BOT)
    required = await claim_log.head()  # the draft and the two keys' registry changes
    await ring.require(required)

    signed = ClaimLog(claim_log.nc, StreamSpec("CLAIMS"), signer=api)
    claim = random_claim_id()
    done = await signed.append(claim, [drafted(claim, actor=PERSON), reviewed(claim)], expected_seq=0, prev_hash=None)
    stored = await signed.read_claim(claim)
    assert stored[0].signature[SIGNATURE] == stored[1].signature[SIGNATURE]  # one signature for the append
    # A batch over many claims, signed once by a direct producer speaking for itself.
    others = [random_claim_id() for _ in range(3)]
    shares = [ClaimShare(c, 0, chain([attached(c, "s1", actor=BOT), attached(c, "s2", actor=BOT)], None)) for c in others]
    async with AtomicBatches(claim_log.nc, claim_log.stream, layout=claim_log.layout, signer=bot) as batches:
        await batches.commit(shares)
    appended = await signed.append(claim, [attached(claim, "s3", actor=PERSON)], expected_seq=done.last_seq, prev_hash=done.last_hash)
    assert appended.last_seq > done.last_seq

    report = await _report(claim_log)
    assert report.ok, report.findings
    assert report.unsigned == 1 and report.signed_after == required == 3 and report.registry_changes == 3
    # An export keeps each signature, and an import republishes it as it was.
    for stored in await signed.read_claim(claim):
        assert _parse(export_line(stored))[1].signature == stored.signature
    with pytest.raises(ValueError, match="signature must map"):
        _parse(export_line(stored)[:-1] + ', "signature": {"Claimlog-Signer": "a\\r\\nNats-Msg-Id: x"}}')


async def test_verify_names_each_unattributable_event_by_claim_and_sequence(claim_log: ClaimLog):
    ring = await KeyRing.open(claim_log.nc, stream=claim_log.stream)
    api, _ = await ring.add(API, delegate=True)
    bot, _ = await ring.add(BOT)
    await ring.require(0)
    claim = random_claim_id()
    await ClaimLog(claim_log.nc, StreamSpec("CLAIMS"), signer=api).append(claim, [drafted(claim, actor=PERSON)], expected_seq=0, prev_hash=None)
    good = attached(claim, "s1", actor=BOT)
    copied = bot.headers([encode(good)])[0]  # a real signature, over other bytes
    bad = {
        await publish_raw(claim_log, claim, attached(claim, "s2", actor=PERSON)): "unsigned",
        await publish_raw(claim_log, claim, attached(claim, "s3", actor=BOT), copied): "does not verify",
        await publish_raw(claim_log, claim, attached(claim, "s4", actor=PERSON), signer=bot): "may sign only for itself",
        await publish_raw(claim_log, claim, attached(claim, "s5", actor=BOT), signer=api): "a direct producer",
        await publish_raw(claim_log, claim, attached(claim, "s6", actor=BOT), signer=Signer.generate()): "does not hold",
    }
    report = await _report(claim_log)
    found = {f.seq: f for f in report.findings if f.kind == "signature"}
    assert sorted(found) == sorted(bad)
    for seq, reason in bad.items():
        assert reason in found[seq].message and found[seq].claim_id == claim
    assert report.counts["signature"] == len(bad) and report.counts.keys() == {"signature"}


async def test_the_projector_folds_only_attributable_events_and_records_why_of_the_others(claim_log: ClaimLog, engine: Engine):
    old = random_claim_id()
    await claim_log.append(old, [drafted(old, actor=PERSON)], expected_seq=0, prev_hash=None)  # before signing: still folds
    ring = await KeyRing.open(claim_log.nc, stream=claim_log.stream)
    api, _ = await ring.add(API, delegate=True)
    bot, _ = await ring.add(BOT)
    await ring.require(await claim_log.head())
    signed = ClaimLog(claim_log.nc, StreamSpec("CLAIMS"), signer=api)
    first, second = "CLM-0501", "CLM-0631"
    for claim in (first, second):
        await signed.append(claim, [drafted(claim, actor=PERSON)], expected_seq=0, prev_hash=None)
    bad = {
        await publish_raw(claim_log, first, attached(first, "unsigned", actor=PERSON)): "unsigned",
        await publish_raw(claim_log, first, attached(first, "impostor", actor=PERSON), signer=bot): "may sign only for itself",
        await publish_raw(claim_log, first, attached(first, "for-bot", actor=BOT), signer=api): "a direct producer",
        await publish_raw(claim_log, first, attached(first, "forged", actor=BOT), bot.headers([b"other bytes"])[0]): "does not verify",
    }
    # Subject names CLM-0631, body names CLM-0501: signed, chained to CLM-0501, and never folded into either.
    head = await claim_log.claim_head(first)
    moved = encode(attached(first, "moved", actor=BOT).model_copy(update={"prev_hash": head.hash}))
    ack = await claim_log.nc.jetstream().publish(claim_log.layout.publish_subject(second, "SourceAttached"), moved, headers=bot.headers([moved])[0])
    bad[ack.seq] = f"names a SourceAttached of {second}, its body a SourceAttached of {first}"
    await publish_raw(claim_log, first, attached(first, "good", actor=BOT), signer=bot)

    await Projector(claim_log, engine, build_projections(), name="projector", batch=3).run_until(await claim_log.head())
    with engine.connect() as conn:
        rows = {r.seq: r.reason for r in conn.execute(select(unreadable_events)).all()}
        pages = {claim: claim_page(conn, claim) for claim in (old, first, second)}
    assert sorted(rows) == sorted(bad)
    for seq, reason in bad.items():
        assert reason in rows[seq]
    assert pages[old] is not None
    assert [s.source_id for s in pages[first].sources] == ["good"]
    assert pages[second].sources == []
