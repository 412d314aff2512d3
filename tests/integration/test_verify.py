"""``claimlog verify`` against a real nats-server and real SQLite and PostgreSQL: a clean log passes,
a forged previous hash and an altered read-model row are named."""

from __future__ import annotations

from pathlib import Path

import nats
from sqlalchemy import Engine, text

from events.subjects import DEFAULT_LAYOUT, event_subject
from services.log import ClaimLog
from services.log.reader import RESTORED_TIME
from tests.builders import attached
from tests.integration.audit_log import forged, project, publish_raw, verify_json, write_claims


def _url(engine: Engine) -> str:
    return engine.url.render_as_string(hide_password=False)


async def test_a_forged_previous_hash_and_an_altered_row_are_named_and_a_clean_log_passes(
    nats_url: str, claim_log: ClaimLog, engine: Engine, tmp_path: Path
):
    claims = await write_claims(claim_log)
    head = await project(claim_log, engine)
    code, report = verify_json(nats_url=nats_url, database_url=_url(engine), cwd=tmp_path)
    assert code == 0, report
    assert report["ok"] and report["findings"] == [] and report["events"] == head == report["last_seq"]
    assert report["claims"] == len(claims) and report["first_seq"] == 1 and report["tables_at_seq"] == head

    # A writer that bypasses the command API and chains its event to nothing the log holds.
    victim = claims[1]
    forged_seq = await publish_raw(
        nats_url, event_subject(victim, "SourceAttached"), forged(attached(victim, "s7"), "ab" * 32)
    )
    await project(claim_log, engine)
    code, report = verify_json(nats_url=nats_url, database_url=_url(engine), cwd=tmp_path)
    assert code == 1
    assert [(f["kind"], f["claim_id"], f["seq"]) for f in report["findings"]] == [("chain", victim, forged_seq)]
    assert "ab" * 32 in report["findings"][0]["message"]

    # A read-model row changed behind the projector's back.
    with engine.begin() as conn:
        conn.execute(text("UPDATE claim_pages SET sources_active = sources_active + 3 WHERE claim_id = :c"), {"c": claims[2]})
    code, report = verify_json(nats_url=nats_url, database_url=_url(engine), cwd=tmp_path)
    assert code == 1
    assert {(f["kind"], f.get("table") or f.get("claim_id")) for f in report["findings"]} == {
        ("chain", victim),
        ("table", "claim_pages"),
    }
    assert report["tables_at_seq"] == forged_seq

    # Log-only checks do not look at the tables.
    code, report = verify_json("--skip-tables", nats_url=nats_url, database_url=_url(engine), cwd=tmp_path)
    assert code == 1 and [f["kind"] for f in report["findings"]] == ["chain"] and report["tables_at_seq"] is None

    # Nothing is left behind: the scratch consumers and (PostgreSQL) the scratch schemas are gone.
    consumers = await claim_log.nc.jetstream().consumers_info(claim_log.stream)
    assert [c.name for c in consumers] == ["projector"]
    if engine.dialect.name == "postgresql":
        with engine.connect() as conn:
            left = conn.execute(text("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'claimlog_verify_%'")).all()
        assert left == []


stored_subject = DEFAULT_LAYOUT.stored_subject


async def test_unreadable_events_and_a_subject_that_lies_are_named_with_sequence_and_subject(
    nats_url: str, claim_log: ClaimLog, tmp_path: Path
):
    claims = await write_claims(claim_log, count=2)
    head = await claim_log.head()
    garbage = await publish_raw(nats_url, event_subject(claims[0], "ClaimDrafted"), b"\xff{not json")
    head_hash = (await claim_log.claim_head(claims[1])).hash
    # A valid event of claims[1], chained correctly, but stored under claims[0]'s subject.
    elsewhere = await publish_raw(
        nats_url, event_subject(claims[0], "SourceAttached"), forged(attached(claims[1], "s8"), head_hash)
    )
    code, report = verify_json("--skip-tables", nats_url=nats_url, cwd=tmp_path)
    assert code == 1 and report["events"] == head + 2
    found = {(f["kind"], f["seq"], f["subject"]) for f in report["findings"]}
    assert ("unreadable", garbage, stored_subject(claims[0], "ClaimDrafted")) in found
    assert ("subject", elsewhere, stored_subject(claims[0], "SourceAttached")) in found
    unreadable = next(f for f in report["findings"] if f["kind"] == "unreadable")
    assert "not JSON" in unreadable["message"] and unreadable["claim_id"] == claims[0]


async def test_an_event_backdated_with_a_store_time_header_is_named(nats_url: str, claim_log: ClaimLog, tmp_path: Path):
    claims = await write_claims(claim_log, count=2)
    head = await claim_log.claim_head(claims[0])
    nc = await nats.connect(nats_url)
    try:  # a writer setting the header only `claimlog import` sets, to make an event look older
        backdated = (
            await nc.jetstream().publish(
                event_subject(claims[0], "SourceAttached"),
                forged(attached(claims[0], "s9"), head.hash),
                headers={RESTORED_TIME: "2020-01-01T00:00:00Z"},
            )
        ).seq
    finally:
        await nc.close()

    code, report = verify_json("--skip-tables", nats_url=nats_url, cwd=tmp_path)

    assert code == 1
    assert [(f["kind"], f["seq"], f["claim_id"]) for f in report["findings"]] == [("time", backdated, claims[0])]
