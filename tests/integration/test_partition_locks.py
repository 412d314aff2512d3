"""A partition's writer locks only its own checkpoint rows: writers of other partitions commit meanwhile,
and ``claimlog parked retry`` (which locks them all) still takes turns with each, so a parked claim in
one partition is released and projected again while the others go on. Real nats-server, SQLite and
PostgreSQL."""

from __future__ import annotations

import asyncio
import time

import pytest
from sqlalchemy import Engine, insert, select, text
from sqlalchemy.exc import OperationalError

from projections.checksum import table_checksums
from projections.registry import build_projections
from projections.sql import insert_new_values
from projections.tables import checkpoints, folded_events
from services.log import ClaimLog
from services.projector import Runner, Scope
from services.projector.connections import end_stale_connections, session_name
from services.projector.parking import lock_checkpoints, parked_rows
from services.projector.retry import retry_parked
from services.projector.writer import CheckpointedWriter
from services.runtime.db import make_engine, session_bound
from tests.builders import attached, history
from tests.integration.test_parking import _clean_replay, poison
from tests.integration.test_projector import append_history
from tests.integration.test_read_your_writes_partitions import claims_in_two_partitions


def _rows(checksums: dict) -> dict:
    return {table: value for table, value in checksums.items() if table != "projection_checkpoints"}


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_on_postgresql_a_partition_lock_leaves_the_other_partitions_free_and_a_retry_waits(engine: Engine):
    rows = [{"name": name, "partition": k, "partitions": 4, "version": 1, "last_seq": 0} for name in ("a", "b") for k in range(4)]
    with engine.begin() as conn:
        conn.execute(insert(checkpoints), rows)
    mine = (checkpoints.c.partition == 1, checkpoints.c.partitions == 4)
    with engine.connect() as holder, engine.connect() as other, engine.connect() as retry:
        holder.begin()
        lock_checkpoints(holder, *mine)
        other.begin()
        other.execute(text("SET LOCAL lock_timeout = '50ms'"))
        lock_checkpoints(other, checkpoints.c.partition == 2, checkpoints.c.partitions == 4)  # not held: taken at once
        locked = other.execute(select(checkpoints.c.partition).where(checkpoints.c.partition == 2).with_for_update(nowait=True)).scalars().all()
        assert locked == [2, 2]
        other.rollback()
        retry.begin()
        retry.execute(text("SET LOCAL lock_timeout = '50ms'"))
        with pytest.raises(OperationalError, match="lock timeout"):
            lock_checkpoints(retry)  # every row, as a retry takes them: waits for the partition's commit
        retry.rollback()
        holder.rollback()


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_on_postgresql_a_workers_session_waits_for_no_lock_and_idles_in_no_transaction_past_its_bound(engine: Engine):
    with engine.begin() as conn:
        conn.execute(insert(checkpoints), [{"name": "a", "partition": k, "partitions": 2, "version": 1, "last_seq": 0} for k in range(2)])
    bound = session_bound(2.0)
    bounded = make_engine(engine.url.render_as_string(hide_password=False), wait_bound=bound)
    try:
        with engine.connect() as holder, bounded.connect() as waiting, bounded.connect() as idle:
            holder.begin()
            lock_checkpoints(holder)
            waiting.begin()
            started = time.monotonic()
            with pytest.raises(OperationalError, match="lock timeout"):
                lock_checkpoints(waiting)  # the holder never lets go: the wait ends at the bound
            assert time.monotonic() - started < 2 * bound
            waiting.rollback()
            holder.rollback()
            idle.begin()
            lock_checkpoints(idle)
            # Left idle inside its transaction (a worker paused there), the connection is ended: its
            # locks go before its leases can lapse, and another connection takes them at once.
            with engine.connect() as other:
                other.begin()
                other.execute(text("SET LOCAL lock_timeout = '10s'"))
                started = time.monotonic()
                lock_checkpoints(other)
                assert time.monotonic() - started < 2 * bound
                other.rollback()
            with pytest.raises(OperationalError):
                idle.execute(select(checkpoints.c.name))
    finally:
        bounded.dispose()


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_on_postgresql_claiming_a_partition_waits_on_no_other_partitions_rows(engine: Engine):
    projections = build_projections()
    with engine.begin() as conn:
        conn.execute(insert(checkpoints), [
            {"name": p.name, "partition": k, "partitions": 4, "version": p.version, "last_seq": 0} for p in projections for k in range(4)
        ])
    bounded = make_engine(engine.url.render_as_string(hide_password=False), wait_bound=0.5)
    try:
        with engine.connect() as holder:
            holder.begin()
            lock_checkpoints(holder, checkpoints.c.partition == 1, checkpoints.c.partitions == 4)  # another worker's commit in flight
            assert CheckpointedWriter(bounded, projections, partitions=4).claim(2, epoch=7) == 0
            holder.rollback()
    finally:
        bounded.dispose()


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_on_postgresql_the_sessions_of_a_worker_gone_are_ended_and_a_live_ones_kept(engine: Engine):
    url = engine.url.render_as_string(hide_password=False)
    gone = make_engine(url, wait_bound=session_bound(60.0), session_name=session_name("gone", "CLAIMS"))
    live = make_engine(url, session_name=session_name("live", "CLAIMS"))
    elsewhere = make_engine(url, session_name=session_name("gone", "OTHER"))  # another registry's worker of that name
    try:
        with gone.connect() as paused, live.connect() as alive, elsewhere.connect() as other:
            paused.begin()
            # A pipelined insert, then nothing: the server's idle timeout is not started, the rows stay locked.
            insert_new_values(paused, folded_events, [(f"e{i}", "CLM-0001", "ada", i) for i in range(20)])
            alive.begin()
            alive.execute(select(checkpoints.c.name))
            other.execute(select(checkpoints.c.name))
            assert end_stale_connections(engine, ["live"], stream="CLAIMS") == 1
            with pytest.raises(OperationalError):
                paused.execute(select(checkpoints.c.name))
            alive.execute(select(checkpoints.c.name))
            other.execute(select(checkpoints.c.name))
    finally:
        for made in (gone, live, elsewhere):
            made.dispose()


async def test_a_parked_claim_in_one_partition_is_retried_while_the_other_partition_goes_on(
    monkeypatch: pytest.MonkeyPatch, claim_log: ClaimLog, engine: Engine, replay_engine: Engine
):
    layout = claim_log.layout
    poisoned, healthy = claims_in_two_partitions(claim_log)
    for claim_id in (poisoned, healthy):
        await append_history(claim_log, claim_id, history(claim_id))
    poison(monkeypatch, poisoned)

    def runner(claim_id: str) -> Runner:
        partition = layout.partition_of(claim_id)
        writer = CheckpointedWriter(engine, build_projections(), partitions=layout.partitions)
        return Runner(claim_log, writer, name=f"p{partition}", batch=3, scope=Scope(partition=partition), epoch=1)

    sick, well = runner(poisoned), runner(healthy)
    stop = asyncio.Event()
    running = [asyncio.create_task(r.run(stop)) for r in (sick, well)]
    try:

        async def until(r: Runner, claim_id: str) -> None:
            last = (await claim_log.claim_head(claim_id)).seq
            async with asyncio.timeout(30):
                while r.checkpoint < last:
                    assert not any(task.done() for task in running), [task.result() for task in running if task.done()]
                    await asyncio.sleep(0.01)

        await until(sick, poisoned)
        await until(well, healthy)
        with engine.connect() as conn:
            assert {row["claim_id"] for row in parked_rows(conn)} == {poisoned}

        monkeypatch.undo()  # the fix is deployed; the retry runs while both partitions' runners are live
        await append_history(claim_log, healthy, [attached(healthy, "s8", "supports")])
        [retried] = await retry_parked(claim_log, engine)
        assert retried.failed_seq is None and retried.applied > 0
        await append_history(claim_log, poisoned, [attached(poisoned, "s9", "qualifies")])
        await until(well, healthy)
        await until(sick, poisoned)  # it sees the claim released and projects its next event
    finally:
        stop.set()
        await asyncio.gather(*running)
    with engine.connect() as conn:
        assert parked_rows(conn) == []
        folded = table_checksums(conn)
    assert _rows(folded) == _rows(await _clean_replay(claim_log, replay_engine))
