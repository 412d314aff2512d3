"""Bulk ingestion in atomic batches over many claims, against a real nats-server: conflicts from another
writer mid-run, references across batches, a bounded claim cache, exactly-once, and the pipelined path
for a stream without atomic batches."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections import Counter
from pathlib import Path

import pytest

from events import Actor
from events.envelope import utc_now
from services.admission import Gate  # no keys: these logs are unsigned
from services.commands.claim_state import claim_state
from services.commands.decide import Context, decide
from services.commands.models import parse_command
from services.ingest.bulk import BulkIngest
from services.ingest.bulk_lines import LineError, Parsed, iter_commands, with_event_id
from services.log import ClaimLog, ConflictError, StreamSpec, connect
from services.log.batches import AtomicBatches
from services.log.stream import StreamConfig
from tests.builders.workload import write_commands

BOT = Actor(id="ingest-bot", kind="model", model="pipeline-2")
WRITER = Actor(id="other-writer", kind="person")


def draft(claim_id: str) -> dict:
    return {"command": "draft_claim", "claim_id": claim_id, "slug": claim_id.lower(), "statement": "S.", "capability": "C", "observed_on": "O."}


def attach(claim_id: str, source_id: str) -> dict:
    return {"command": "attach_source", "claim_id": claim_id, "source_id": source_id, "relation": "supports", "measured": "M."}


def write_lines(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def attach_from_another_process(nats_url: str, claim_id: str, source_id: str, *, command: dict | None = None) -> None:
    """Another writer, on its own connection and event loop, attaches a source to the claim (or runs
    ``command``), retrying its own conflicts."""
    from events import new_event_id
    from events.envelope import utc_now
    from services.commands.decide import Context, decide
    from services.commands.models import parse_command

    async def write() -> None:
        nc = await connect(nats_url)
        log = ClaimLog(nc, StreamSpec("CLAIMS"))
        for _ in range(20):
            state = claim_state(claim_id, await log.read_claim(claim_id), Gate())
            ctx = Context(actor=WRITER, event_id=new_event_id(), now=utc_now(), prev_hash=state.head_hash)
            events = decide(parse_command(json.dumps(command or attach(claim_id, source_id))), state, ctx)
            try:
                await log.append(claim_id, events, expected_seq=state.head_seq, prev_hash=state.head_hash)
                break
            except ConflictError:
                continue
        await nc.close()

    thread = threading.Thread(target=asyncio.run, args=(write(),))
    thread.start()
    thread.join()


async def test_another_writer_mid_run_costs_only_the_lines_its_event_makes_fail(
    nats_url: str, claim_log: ClaimLog, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
):
    claims = [f"CLM-{n:04d}" for n in range(10)]
    lines = [draft(c) for c in claims] + [attach(c, f"s{r}") for r in range(1, 5) for c in claims]
    path = write_lines(tmp_path / "commands.jsonl", lines)
    conflicted = claims[3]
    conflicting_line = lines.index(attach(conflicted, "s4")) + 1

    def source():
        for item in iter_commands(path):
            if item.number == 40:  # claim 3 is drafted (lines are read at most four spans of five ahead of deciding),
                # and its state is held by the ingestion: its next batch expects a stale sequence
                attach_from_another_process(nats_url, conflicted, "s4")
            yield item

    caplog.set_level(logging.INFO, logger="services.ingest.bulk")
    ingest = BulkIngest(claim_log, BOT, batch=5, read_ahead=5)
    in_flight = []
    send = AtomicBatches.send

    async def counted(batches: AtomicBatches, shares):
        in_flight.append(len(ingest._flight))
        return await send(batches, shares)

    monkeypatch.setattr(AtomicBatches, "send", counted)
    report = await ingest.run(source())
    assert [(e.number, e.reason) for e in report.rejected] == [(conflicting_line, "source_exists")]
    assert (report.lines, report.accepted, report.present) == (50, 49, 0)
    assert await claim_log.head() == 50  # 49 of the file and the other writer's one, each once
    assert f"claims moved: ['{conflicted}']" in caplog.text
    assert caplog.text.count("was refused") == 1  # the batch sent after the refused one (other claims) landed on its own
    assert max(in_flight) == 1  # each batch of five other claims went out while the one before it was synced
    state = claim_state(conflicted, await claim_log.read_claim(conflicted), Gate())
    assert set(state.sources) == {"s1", "s2", "s3", "s4"}


async def test_a_claim_taken_to_be_new_that_has_events_is_read_and_its_lines_decided_again(
    nats_url: str, claim_log: ClaimLog, tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    attach_from_another_process(nats_url, "CLM-0001", "", command=draft("CLM-0001"))  # in the log before the run
    path = write_lines(tmp_path / "commands.jsonl", [
        draft("CLM-0001"), attach("CLM-0001", "s1"), draft("CLM-0002"), attach("CLM-0002", "s1"), draft("CLM-0003"),
    ])
    caplog.set_level(logging.INFO, logger="services.ingest.bulk")
    report = await BulkIngest(claim_log, BOT).run(iter_commands(path))
    assert "was refused" in caplog.text  # its lines start with its draft: taken to be new, its batch expected no events
    assert [(e.number, e.reason) for e in report.rejected] == [(1, "claim_exists")]
    assert (report.accepted, await claim_log.head()) == (4, 5)
    state = claim_state("CLM-0001", await claim_log.read_claim("CLM-0001"), Gate())
    assert state.drafted_by.id == WRITER.id and set(state.sources) == {"s1"}


async def test_a_reference_waits_for_the_drafts_acknowledgement_across_batches(claim_log: ClaimLog, tmp_path: Path):
    path = write_lines(tmp_path / "commands.jsonl", [
        draft("CLM-0001"), draft("CLM-0002"),
        {"command": "relate_claims", "claim_id": "CLM-0002", "related_claim_id": "CLM-0001"},
        {"command": "relate_claims", "claim_id": "CLM-0001", "related_claim_id": "CLM-0003"},  # drafted later: refused
        draft("CLM-0003"),
        {"command": "supersede_claim", "claim_id": "CLM-0001", "superseded_by": "CLM-0003"},
    ])
    report = await BulkIngest(claim_log, BOT, batch=1000).run(iter_commands(path))
    assert [(e.number, e.reason) for e in report.rejected] == [(4, "claim_not_found")]
    assert report.accepted == 5 and await claim_log.head() == 5


@pytest.mark.parametrize("read_ahead", [2000, 16])  # 16: the next lines' claims are read while claims come and go
async def test_a_small_claim_cache_reads_evicted_claims_again_and_a_rerun_publishes_nothing(claim_log: ClaimLog, tmp_path: Path, read_ahead: int):
    path = tmp_path / "commands.jsonl"
    lines = write_commands(path, claims=300, per_claim=5)
    # interleave the claims so that each comes back after many others have pushed it out of the cache
    rows = path.read_text().splitlines()
    path.write_text("".join(rows[c * 5 + k] + "\n" for k in range(5) for c in range(300)))
    first = await BulkIngest(claim_log, BOT, batch=64, capacity=8, read_ahead=read_ahead).run(iter_commands(path))
    assert (first.accepted, first.rejected) == (lines, [])
    assert await claim_log.head() == lines
    again = await BulkIngest(claim_log, BOT, capacity=8, read_ahead=read_ahead).run(iter_commands(path))
    assert (again.accepted, again.present, again.rejected) == (0, lines, [])
    assert await claim_log.head() == lines


async def test_a_stream_without_atomic_batches_is_warned_about_and_takes_the_pipelined_path(
    claim_log: ClaimLog, tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    config = (await claim_log.nc.jetstream().stream_info(claim_log.stream)).config
    config.allow_atomic = False
    await claim_log.nc.jetstream().update_stream(config)
    path = write_lines(tmp_path / "commands.jsonl", [draft("CLM-0001"), attach("CLM-0001", "s1"), attach("CLM-0001", "s1")])
    items = list(iter_commands(path))
    assert all(isinstance(i, Parsed) for i in items) and not any(isinstance(i, LineError) for i in items)
    report = await BulkIngest(claim_log, BOT).run(items)
    assert "does not take atomic batches" in caplog.text
    assert (report.accepted, [(e.number, e.reason) for e in report.rejected]) == (2, [(3, "source_exists")])
    assert await claim_log.head() == 2
    assert StreamConfig  # the log module's own configuration type


async def test_pages_import_in_one_batch_and_a_page_whose_claim_moved_meanwhile_is_decided_again(nats_url: str, claim_log: ClaimLog):
    from events.envelope import utc_now
    from services.ingest.page_batches import import_pages
    from services.ingest.pages import read_page, sample_pages

    pages = [read_page(path) for path in sample_pages()]
    moved = pages[1].claim_id
    calls = 0

    def clock():
        nonlocal calls
        calls += 1
        if calls == len(pages):  # every claim is read and the first attempt decided: another writer moves one
            attach_from_another_process(nats_url, moved, "", command=draft(moved))
        return utc_now()

    outcomes = await import_pages(claim_log, pages, clock=clock)
    assert [o.error for o in outcomes] == [None, None, None] and calls == 2 * len(pages)
    head = await claim_log.head()
    assert head == sum(o.published for o in outcomes) + 1  # the pages' events and the other writer's draft, each once
    stored = await claim_log.read_claim(moved)
    assert stored[0].event.actor.id == WRITER.id and len(stored) == outcomes[1].published + 1
    again = await import_pages(claim_log, pages)
    assert [o.published for o in again] == [0, 0, 0] and await claim_log.head() == head


async def test_a_claim_held_while_its_read_ahead_is_under_way_keeps_the_held_state(claim_log: ClaimLog, tmp_path: Path):
    from services.ingest.bulk_claims import ClaimCache, ClaimSlot

    write_lines(tmp_path / "setup.jsonl", [draft("CLM-0001")])
    await BulkIngest(claim_log, BOT).run(iter_commands(tmp_path / "setup.jsonl"))
    cache = ClaimCache(claim_log, capacity=8)
    reading = asyncio.ensure_future(cache.prefetch({"CLM-0001", "CLM-0002"}))
    await asyncio.sleep(0)  # the read has started: it waits for the server
    deciding = ClaimSlot(claim_state("CLM-0001", [], Gate()), acked_seq=1, unacked=3)  # a decision got there first
    cache.hold("CLM-0001", deciding)
    await reading
    assert cache.held("CLM-0001") is deciding
    assert cache.held("CLM-0002").acked_seq == 0


@pytest.mark.parametrize("atomic", [True, False], ids=["atomic", "pipelined"])
async def test_a_lines_derived_event_id_another_writer_sent_first_blocks_nothing(claim_log: ClaimLog, tmp_path: Path, atomic: bool):
    if not atomic:
        config = (await claim_log.nc.jetstream().stream_info(claim_log.stream)).config
        config.allow_atomic = False
        await claim_log.nc.jetstream().update_stream(config)
    claim_id = "CLM-0001"
    path = write_lines(tmp_path / "commands.jsonl", [draft(claim_id), attach(claim_id, "s1")])
    items = list(iter_commands(path))
    derived = with_event_id(items[1], BOT, Counter()).event_id  # the id the bot's line derives: anyone can compute it
    first = await BulkIngest(claim_log, BOT).run(items[:1])
    assert first.accepted == 1
    # Another writer sends it first, as its own event id on the claim.
    state = claim_state(claim_id, await claim_log.read_claim(claim_id), Gate())
    ctx = Context(actor=WRITER, event_id=derived, now=utc_now(), prev_hash=state.head_hash)
    events = decide(parse_command(json.dumps(attach(claim_id, "s9"))), state, ctx)
    await claim_log.append(claim_id, events, expected_seq=state.head_seq, prev_hash=state.head_hash)

    report = await BulkIngest(claim_log, BOT).run(list(iter_commands(path)))
    assert (report.accepted, report.present, report.rejected) == (1, 1, [])
    stored = await claim_log.read_claim(claim_id)
    assert [(s.event.actor.id, s.event.event_id) for s in stored[1:]] == [(WRITER.id, derived), (BOT.id, derived)]
    assert set(claim_state(claim_id, stored, Gate()).sources) == {"s1", "s9"}
    again = await BulkIngest(claim_log, BOT).run(list(iter_commands(path)))
    assert (again.accepted, again.present, again.rejected) == (0, 2, [])
    assert await claim_log.head() == 3


@pytest.mark.parametrize("atomic", [True, False], ids=["atomic", "pipelined"])
async def test_a_forged_retraction_decides_no_bulk_line(claim_log: ClaimLog, tmp_path: Path, atomic: bool):
    # Signatures required: an unsigned retraction "by the drafter", published past the API, is refused by the
    # gate, so both bulk paths decide the claim's lines against the claim as every reader shows it: open.
    from services.identity.keys import KeyRing
    from tests.builders import retracted
    from tests.builders.raw import publish_raw

    if not atomic:
        config = (await claim_log.nc.jetstream().stream_info(claim_log.stream)).config
        config.allow_atomic = False
        await claim_log.nc.jetstream().update_stream(config)
    ring = await KeyRing.open(claim_log.nc, stream=claim_log.stream)
    delegate, _ = await ring.add(Actor(id="claimlog-api", kind="service"), delegate=True)
    await ring.require(await claim_log.head())
    signed = ClaimLog(claim_log.nc, StreamSpec(claim_log.stream), signer=delegate)
    claim_id = "CLM-0001"
    first = await BulkIngest(signed, BOT).run(list(iter_commands(write_lines(tmp_path / "draft.jsonl", [draft(claim_id)]))))
    assert first.accepted == 1
    await publish_raw(signed, claim_id, retracted(claim_id, actor=BOT))  # unsigned: forged
    report = await BulkIngest(signed, BOT).run(list(iter_commands(write_lines(tmp_path / "attach.jsonl", [attach(claim_id, "s1")]))))
    assert (report.accepted, report.rejected) == (1, []), report.rejected
