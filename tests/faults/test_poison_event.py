"""A poison event against a real projector process: its claim-page fold raises on one claim's source withdrawal.

`claimlog projector` runs with the fault (poisoned_projector.py) over a published log to its head. The
database then holds exactly that claim's events from the withdrawal on as parked, in log order, the
first with the error and the others behind it; every other claim is projected as a clean replay has
it. With the projector stopped, `claimlog parked retry` in a process running the unpatched code (the fix
deployed) applies the parked events in order, and the tables equal a clean replay of the whole log.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import Engine, select

from events.subjects import claim_of
from projections.tables import claim_pages, metadata, parked_events
from services.log import ClaimLog
from tests.faults.conftest import PostgresTarget, PublishedLog, sqlite_url
from tests.faults.harness import (
    ROOT,
    CleanReplay,
    checkpoint,
    checksums,
    log_spec,
    migrated,
    start_projector,
    stop,
    wait_for_checkpoint,
)
from tests.faults.poisoned_projector import POISON_ERROR

POISONED_TYPE = "SourceWithdrawn"


async def log_by_claim(claim_log: ClaimLog, head: int) -> dict[str, list[tuple[int, str]]]:
    """Each claim's (sequence, event type) in log order, read from the log itself (by subject)."""
    by_claim: dict[str, list[tuple[int, str]]] = {}
    after = 0
    while after < head:
        page = await claim_log.read_log(after_seq=after, limit=1000)
        assert page, f"the log ended at {after}, before its head {head}"
        for stored in page:
            by_claim.setdefault(claim_of(stored.subject), []).append(
                (stored.seq, stored.subject.rsplit(".", 1)[1])
            )
        after = page[-1].seq
    return by_claim


def pick_poisoned(by_claim: dict[str, list[tuple[int, str]]]) -> tuple[str, int]:
    """The claim with the most events from its first withdrawal on (the lowest id of those): it, and that index."""
    candidates = []
    for claim_id, events in by_claim.items():
        types = [event_type for _, event_type in events]
        if POISONED_TYPE in types:
            first = types.index(POISONED_TYPE)
            candidates.append((first - len(events), claim_id, first))
    assert candidates, f"no claim of the workload has a {POISONED_TYPE} event"
    _, claim_id, first = min(candidates)
    return claim_id, first


def checksums_without(engine: Engine, claim_id: str) -> dict[str, tuple[int, str]]:
    """Every per-claim read-model table's rows except ``claim_id``'s (parked events aside): count and SHA-256."""
    sums = {}
    with engine.connect() as conn:
        for table in metadata.sorted_tables:
            if "claim_id" not in table.columns or table.name == parked_events.name:
                continue
            columns = [c for c in table.columns if c.info.get("checksum", True)]
            query = select(*columns).where(table.c.claim_id != claim_id).order_by(*table.primary_key.columns)
            digest, count = hashlib.sha256(), 0
            for row in conn.execute(query):
                digest.update(repr(tuple(row)).encode())
                count += 1
            sums[table.name] = (count, digest.hexdigest())
    return sums


def cli(url: str, nats_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``claimlog ...`` in a process of its own, with the code as it is (no fault)."""
    env = {
        **os.environ,
        "CLAIMLOG_DATABASE_URL": url,
        "CLAIMLOG_NATS_URL": nats_url,
        "CLAIMLOG_PARTITIONS": "0",  # the scenarios' log (harness.log_spec)
        "PYTHONPATH": str(ROOT),
        "COLUMNS": "250",
    }
    return subprocess.run(
        [sys.executable, "-m", "services.cli", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


async def poison_then_retry(
    log: PublishedLog,
    url: str,
    engine: Engine,
    clean: CleanReplay,
    report: Callable[[str], None],
    *,
    name: str,
    projector_log: Path,
) -> None:
    by_claim = await log_by_claim(clean.claim_log, log.head)
    assert len(by_claim) == log.claims
    poisoned, first = pick_poisoned(by_claim)
    events = by_claim[poisoned]
    stored = await clean.claim_log.read_claim(poisoned)
    assert [(e.seq, e.event.type) for e in stored] == events, "the claim's own read differs from the log's"
    withdrawal = events[first][0]
    held = events[first:]
    reason = f"ValueError: {POISON_ERROR} {poisoned}"
    report(
        f"injected: `claimlog projector` whose claim-page fold raises on {poisoned}'s {POISONED_TYPE} events "
        f"(ValueError), on a log of {log.head:,} events over {log.claims:,} claims; {poisoned} has {len(events)} "
        f"events at sequences {', '.join(f'{seq:,}' for seq, _ in events)}, its first withdrawal at {withdrawal:,}"
    )

    projector = start_projector(log.url, url, name=name, poison=poisoned, log_to=projector_log)
    try:
        expected, reached = await asyncio.gather(
            clean.to(log.head),
            wait_for_checkpoint(engine, beyond=log.head - 1, timeout=90, process=projector),
        )
        assert projector.poll() is None, "the poisoned projector exited"
    finally:
        stop(projector)
    assert reached == log.head

    # Parked: exactly the claim's events from the withdrawal on, in log order, with the reason.
    with engine.connect() as conn:
        rows = [dict(r._mapping) for r in conn.execute(select(parked_events).order_by(parked_events.c.seq))]
        pages = dict(conn.execute(select(claim_pages.c.claim_id, claim_pages.c.last_seq)).all())
    assert [(r["seq"], r["claim_id"], r["event_type"]) for r in rows] == [
        (seq, poisoned, t) for seq, t in held
    ]
    assert [r["reason"] for r in rows] == [reason] + [f"claim parked after seq {withdrawal}"] * (
        len(held) - 1
    )
    assert all(r["subject"] == log_spec().layout.stored_subject(poisoned, r["event_type"]) for r in rows)
    logged = projector_log.read_text()
    assert f"parked claim {poisoned} at sequence {withdrawal} ({POISONED_TYPE})" in logged, logged[-3000:]
    report(
        f"checked: the projector ran on to the head ({log.head:,}); parked are exactly {poisoned}'s {len(held)} events "
        f'from {withdrawal:,} on, in order, the first with "{reason}", the other {len(held) - 1} with '
        f'"claim parked after seq {withdrawal}"; its page stops at {events[first - 1][0]:,}, the event before'
    )

    # Every other claim keeps projecting: its page is where a clean replay's is (at its last event the
    # contract's rules admit: the workload's reviews by a service are refused by every reader), and its rows
    # equal a clean replay's.
    assert pages[poisoned] == events[first - 1][0]
    with clean.engine.connect() as conn:
        replayed = dict(conn.execute(select(claim_pages.c.claim_id, claim_pages.c.last_seq)).all())
    others = {claim_id: seq for claim_id, seq in replayed.items() if claim_id != poisoned}
    assert set(others) == set(by_claim) - {poisoned}
    assert {c: seq for c, seq in pages.items() if c != poisoned} == others
    without = checksums_without(engine, poisoned)
    assert without == checksums_without(clean.engine, poisoned), (
        "another claim's rows differ from a clean replay"
    )
    with_fault = checksums(engine)
    assert with_fault != expected, "the poison changed nothing"
    report(
        f"checked: every other claim ({len(others):,}) has its page at its last event's sequence; their rows in "
        f"{len(without)} per-claim tables ({sum(n for n, _ in without.values()):,} rows) equal a clean replay's"
    )

    listed = cli(url, log.url, "parked")
    assert listed.returncode == 1, listed.stderr
    assert f"{len(held)} parked event(s)" in listed.stdout, listed.stdout

    # The fix deployed: the retry runs the code without the fault, with the projector stopped.
    retried = cli(url, log.url, "parked", "retry")
    assert retried.returncode == 0, retried.stderr
    assert f"{poisoned}: applied {len(held)} parked event(s) in order; unparked" in retried.stderr, (
        retried.stderr
    )
    with engine.connect() as conn:
        left = conn.execute(select(parked_events.c.seq)).scalars().all()
    assert left == [], f"still parked after the retry: {left}"
    assert checkpoint(engine) == log.head
    after = checksums(engine)
    assert after == expected, "after the retry the tables differ from a clean replay"
    report(
        f"checked: `claimlog parked` listed {len(held)} and exited 1; `claimlog parked retry` (unpatched code, "
        f"projector stopped) applied {len(held)} in order and exited 0; nothing parked; {len(after)} table "
        "checksums equal a clean replay of the whole log"
    )


@pytest.mark.slow
@pytest.mark.timeout(120)
async def test_a_poison_event_parks_its_claims_later_events_in_order_while_every_other_claim_projects_and_retry_after_the_fix_gives_a_clean_replay(
    small_replay_log: PublishedLog, tmp_path, fault_report
):
    url = sqlite_url(tmp_path, "poisoned.sqlite3")
    engine = migrated(url)
    try:
        await poison_then_retry(
            small_replay_log,
            url,
            engine,
            small_replay_log.clean,
            fault_report,
            name="poisoned-sqlite",
            projector_log=tmp_path / "projector.log",
        )
    finally:
        engine.dispose()


@pytest.mark.slow
@pytest.mark.timeout(120)
async def test_a_poison_event_into_postgresql_parks_its_claims_later_events_in_order_and_retry_after_the_fix_gives_a_clean_replay(
    small_replay_log: PublishedLog, postgres_target: PostgresTarget, tmp_path, fault_report
):
    await poison_then_retry(
        small_replay_log,
        postgres_target.url,
        postgres_target.engine,
        postgres_target.clean,
        fault_report,
        name="poisoned-postgres",
        projector_log=tmp_path / "projector.log",
    )
