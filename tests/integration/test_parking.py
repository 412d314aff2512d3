"""A projection that raises on one claim's event parks that claim, in order, and every other claim keeps projecting."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from sqlalchemy import Engine

from events.source import SourceWithdrawn
from projections import claim_page as claim_page_fold
from projections.checksum import table_checksums
from projections.registry import build_projections
from services.log import ClaimLog
from services.projector import Projector
from services.projector.parking import parked_count, parked_rows
from services.projector.retry import retry_parked
from services.read_api.queries import claim_page
from services.rebuild.parallel_worker import clear_place, fold_partition
from services.runtime.db import make_engine, upgrade
from tests.builders import attached, filed, history
from tests.conftest import _postgres_database, random_claim_id
from tests.integration.test_partitioned_folds import without_checkpoints
from tests.integration.test_projector import append_history

POISON_ERROR = "the withdrawal handler has a bug"


@pytest.fixture
def worker_url(database_url: str, tmp_path: Path) -> Iterator[str]:
    """A migrated place for a rebuild worker, no connection held open (the worker sets its own pragmas)."""
    urls = [f"sqlite:///{tmp_path / 'worker.sqlite3'}"] if database_url.startswith("sqlite") else _postgres_database()
    for url in urls:
        engine = make_engine(url)
        upgrade(engine)
        engine.dispose()
        yield url


def poison(monkeypatch: pytest.MonkeyPatch, claim_id: str) -> None:
    """Make the claim-page fold raise on ``claim_id``'s source withdrawals, as a bug would."""
    handler = claim_page_fold.HANDLERS[SourceWithdrawn]

    def broken(page, event, stamp):
        if event.claim_id == claim_id:
            raise ValueError(POISON_ERROR)
        handler(page, event, stamp)

    monkeypatch.setitem(claim_page_fold.HANDLERS, SourceWithdrawn, broken)


async def project(claim_log: ClaimLog, engine: Engine, *, batch: int, name: str = "projector") -> Projector:
    projector = Projector(claim_log, engine, build_projections(), name=name, batch=batch)
    await projector.run_until(await claim_log.head())
    return projector


def cli(engine: Engine, nats_url: str, *args: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "CLAIMLOG_DATABASE_URL": engine.url.render_as_string(hide_password=False),
        "CLAIMLOG_NATS_URL": nats_url,
        "COLUMNS": "250",
    }
    return subprocess.run([sys.executable, "-m", "services.cli", *args], env=env, capture_output=True, text=True, timeout=60)


async def test_a_poison_event_parks_its_claim_in_order_and_after_the_fix_retry_gives_a_clean_replay(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    nats_url: str,
    claim_log: ClaimLog,
    engine: Engine,
    replay_engine: Engine,
    worker_url: str,
):
    poisoned, others = random_claim_id(), [random_claim_id() for _ in range(3)]
    for claim_id in [others[0], poisoned, *others[1:]]:
        await append_history(claim_log, claim_id)
    poison(monkeypatch, poisoned)

    live = await project(claim_log, engine, batch=4)  # batches that mix claims and cut through histories
    await append_history(claim_log, poisoned, [attached(poisoned, "s8", "supports"), filed(poisoned, "d8")])
    await append_history(claim_log, others[0], [attached(others[0], "s8", "supports")])
    await live.run_until(await claim_log.head())

    events = {c: await claim_log.read_claim(c) for c in [poisoned, *others]}
    withdrawal = next(e for e in events[poisoned] if e.event.type == "SourceWithdrawn")
    held = [e for e in events[poisoned] if e.seq >= withdrawal.seq]
    with engine.connect() as conn:
        rows = parked_rows(conn)
        assert parked_count(conn) == len(held)
        for other in others:  # every other claim's page is complete
            assert claim_page(conn, other).as_of_seq == events[other][-1].seq
        assert claim_page(conn, poisoned).as_of_seq == max(e.seq for e in events[poisoned] if e.seq < withdrawal.seq)
        with_fault = table_checksums(conn)
    assert [(r["seq"], r["claim_id"], r["event_type"]) for r in rows] == [(e.seq, poisoned, e.event.type) for e in held]
    assert rows[0]["reason"] == f"ValueError: {POISON_ERROR}" and rows[0]["subject"] == held[0].subject
    assert {r["reason"] for r in rows[1:]} == {f"claim parked after seq {withdrawal.seq}"}

    # Deterministic: a replay in other batches, and a rebuild's write-behind worker, park the same events.
    await project(claim_log, replay_engine, batch=1000, name="replay")
    with replay_engine.connect() as conn:
        assert table_checksums(conn) == with_fault
    with caplog.at_level(logging.WARNING, logger="services.rebuild.parallel_worker"):
        # A worker's place holds each partition's checkpoint; the rebuild writes the whole log's after the merge.
        assert without_checkpoints(await _worker_fold(nats_url, claim_log, worker_url)) == without_checkpoints(with_fault)
    assert "folding its partitions again without write-behind" in caplog.text

    listed = cli(engine, nats_url, "parked")
    assert listed.returncode == 1, listed.stderr
    assert f"{len(held)} parked event(s)" in listed.stdout and POISON_ERROR in listed.stdout

    # Before the fix, a retry names the event that still fails and changes nothing.
    [still] = await retry_parked(claim_log, engine)
    assert (still.claim_id, still.failed_seq, still.applied) == (poisoned, withdrawal.seq, 0)
    assert POISON_ERROR in (still.reason or "")
    with engine.connect() as conn:
        assert table_checksums(conn) == with_fault

    monkeypatch.undo()  # the fix is deployed
    retried = cli(engine, nats_url, "parked", "retry", poisoned)
    assert retried.returncode == 0, retried.stderr
    assert f"applied {len(held)} parked event(s)" in retried.stderr
    assert cli(engine, nats_url, "parked").returncode == 0

    # The live projector (which parked the claim) sees it released and projects its next event.
    await append_history(claim_log, poisoned, [attached(poisoned, "s9", "qualifies")])
    await live.run_until(await claim_log.head())
    clean = await _clean_replay(claim_log, replay_engine)
    with engine.connect() as conn:
        assert table_checksums(conn) == clean
        assert claim_page(conn, poisoned).as_of_seq == await claim_log.head()


async def test_a_projection_error_that_is_not_one_claims_still_stops_the_projector(
    monkeypatch: pytest.MonkeyPatch, claim_log: ClaimLog, engine: Engine
):
    from sqlalchemy.exc import ProgrammingError

    claim_id = random_claim_id()
    await append_history(claim_log, claim_id, history(claim_id)[:3])

    def missing_table(*_args, **_kwargs):
        raise ProgrammingError("SELECT 1", {}, Exception("relation does not exist"))

    monkeypatch.setattr("projections.contributors.ContributorsProjection.apply_batch", missing_table)
    with pytest.raises(ProgrammingError):
        await project(claim_log, engine, batch=10)
    with engine.connect() as conn:
        assert parked_count(conn) == 0


async def _worker_fold(nats_url: str, claim_log: ClaimLog, url: str) -> dict[str, str]:
    """A parallel rebuild's only worker, folding every partition (in this process, so the fault applies):
    the checksums of what it folded."""
    head = await claim_log.head()
    await fold_partition(nats_url, claim_log.spec, (url, None), 0, 1, head, "worker-p0", SimpleNamespace(value=0))
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return table_checksums(conn)
    finally:
        engine.dispose()


async def _clean_replay(claim_log: ClaimLog, engine: Engine) -> dict[str, str]:
    clear_place(engine)
    await project(claim_log, engine, batch=1000, name="clean")
    with engine.connect() as conn:
        return table_checksums(conn)
