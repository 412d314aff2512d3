"""Projector workers dividing a partitioned log by leases, on a real nats-server, SQLite and PostgreSQL:
one worker takes every partition, a joining one takes its share, a stopping one hands its partitions
over at once, and the tables equal one projector's replay of the whole log."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from itertools import pairwise

from sqlalchemy import Connection, Engine, select, update

from projections.checksum import table_checksums
from projections.registry import build_projections
from projections.tables import checkpoints
from services.log import ClaimLog
from services.projector.leases import Lease, Leases, wanted
from services.projector.worker import Worker
from tests.builders import history
from tests.conftest import random_claim_id
from tests.integration.test_projector import project_all

LEASE = 30.0  # far longer than any wait here: every partition that moves, moves by hand-over, not by lapse
WAIT = 20.0


async def append_claims(claim_log: ClaimLog, count: int) -> dict[int, int]:
    """Append ``count`` claims' histories; the last sequence of each partition that got one."""
    last_of: dict[int, int] = {}
    for _ in range(count):
        claim = random_claim_id()
        appended = await claim_log.append(claim, history(claim), expected_seq=0, prev_hash=None)
        last_of[claim_log.layout.partition_of(claim)] = appended.last_seq
    return last_of


def applied(engine: Engine, partitions: int) -> dict[int, int]:
    """Each partition's checkpoint (the lowest over the projections), as the database has it."""
    with engine.connect() as conn:
        rows = conn.execute(select(checkpoints).where(checkpoints.c.partitions == partitions)).all()
    at: dict[int, int] = {}
    for row in rows:
        at[row.partition] = min(at.get(row.partition, row.last_seq), row.last_seq)
    return at


async def until(condition: Callable[[], bool], what: str) -> None:
    async with asyncio.timeout(WAIT):
        while not condition():
            await asyncio.sleep(0.05)
    assert condition(), what


@asynccontextmanager
async def running(claim_log: ClaimLog, engine: Engine, name: str, *, lease: float = LEASE) -> AsyncIterator[tuple[Worker, asyncio.Event, asyncio.Task]]:
    leases = await Leases.open(claim_log.nc.jetstream(), name, ttl=lease)
    worker = Worker(claim_log, leases, engine, build_projections, consumer_prefix="projector", batch=50, lease_seconds=lease)
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run(stop))
    try:
        yield worker, stop, task
    finally:
        stop.set()
        await task


async def test_workers_divide_the_partitions_hand_them_over_on_stop_and_equal_one_replay(
    claim_log: ClaimLog, engine: Engine, replay_engine: Engine
):
    partitions = claim_log.layout.partitions
    everything = set(range(partitions))
    last_of = await append_claims(claim_log, 30)
    async with running(claim_log, engine, "first") as (first, _, _):
        await until(lambda: set(first.holding()) == everything, "one worker takes every partition")
        await until(lambda: all(applied(engine, partitions).get(k, 0) >= s for k, s in last_of.items()), "it folds them all")

        async with running(claim_log, engine, "second") as (second, stop_second, second_task):
            shares = {name: wanted(name, ["first", "second"], partitions) for name in ("first", "second")}
            await until(
                lambda: set(first.holding()) == shares["first"] and set(second.holding()) == shares["second"],
                "a joining worker takes its share and the other lets go of it",
            )
            assert shares["first"] and shares["second"]
            holders = await first.leases.holders(partitions)
            assert {k: owner for k, (owner, _) in holders.items()} == {k: n for n, ks in shares.items() for k in ks}
            # Commits carry the lease's current revision: the checkpoints of the second's partitions hold its epochs.
            last_of |= await append_claims(claim_log, 30)
            await until(lambda: all(applied(engine, partitions).get(k, 0) >= s for k, s in last_of.items()), "both fold theirs")

            stop_second.set()
            await second_task
            assert second.owned == {}
            # Given back at once: the first takes them on its next look, long before the lease time.
            await until(lambda: set(first.holding()) == everything, "the stopping worker's partitions come back")
            assert {owner for owner, _ in (await first.leases.holders(partitions)).values()} == {"first"}
            assert await first.leases.workers() == ["first"]

        last_of |= await append_claims(claim_log, 10)
        await until(lambda: all(applied(engine, partitions).get(k, 0) >= s for k, s in last_of.items()), "the first folds all again")

    await project_all(claim_log, replay_engine, name="replay")
    with engine.connect() as apart, replay_engine.connect() as together:
        assert _rows(table_checksums(apart)) == _rows(table_checksums(together))


async def test_a_worker_whose_lease_another_took_stops_folding_that_partition(claim_log: ClaimLog, engine: Engine):
    partitions = claim_log.layout.partitions
    await append_claims(claim_log, 5)
    async with running(claim_log, engine, "first") as (first, _, _):
        await until(lambda: len(first.holding()) == partitions, "one worker takes every partition")
        # Another takes partition 0 behind its back (as after a pause past the lease): the next renewal fails.
        await first.leases._kv.delete("partition.0")
        thief = await Leases.open(claim_log.nc.jetstream(), "thief", ttl=LEASE)
        assert await thief.take(0) is not None
        await until(lambda: 0 not in first.owned, "the worker lets the partition go")
        tries: list[Lease | None] = []
        take = first.leases.take

        async def counted(partition: int) -> Lease | None:
            lease = await take(partition)
            if partition == 0:
                tries.append(lease)
            return lease

        first.leases.take = counted  # type: ignore[method-assign]
        await until(lambda: len(tries) >= 2, "the worker asks for partition 0 again")
        assert tries == [None] * len(tries) and 0 not in first.owned  # and does not get it while another holds it
    holders = await thief.holders(partitions)
    assert holders.keys() == {0} and holders[0][0] == "thief"  # the stopping worker gave back only its own


async def test_leases_are_renewed_while_a_batch_waits_on_the_database(claim_log: ClaimLog, engine: Engine):
    lease = 1.5
    partitions = claim_log.layout.partitions
    first_of = await append_claims(claim_log, 5)
    async with running(claim_log, engine, "waiting", lease=lease) as (worker, _, _):
        await until(lambda: len(worker.holding()) == partitions, "the worker takes every partition")
        await until(lambda: len(applied(engine, partitions)) == partitions, "its runner claims every partition's checkpoints")
        await until(lambda: all(applied(engine, partitions).get(k, 0) >= s for k, s in first_of.items()), "it folds the first claims")
        renewed = Renewals(worker)
        # Another session holds the checkpoint rows (the write lock on SQLite) for twice the lease, and
        # the worker's next batch waits for them: on PostgreSQL with no lock timeout, as long as it takes.
        blocker = Blocker(engine, hold=2 * lease)
        blocker.start()
        await asyncio.to_thread(blocker.locked.wait)
        assert blocker.error is None, f"the blocker could not take the lock: {blocker.error!r}"
        last_of = await append_claims(claim_log, 5)
        await asyncio.to_thread(blocker.join)
        assert blocker.folded_meanwhile == {}, "the batch did not wait: nothing was blocked"
        await until(lambda: all(applied(engine, partitions).get(k, 0) >= s for k, s in last_of.items()), "the batch commits")
        assert renewed.longest_gap() < lease, f"a lease went {renewed.longest_gap():.1f}s unrenewed (the lease is {lease}s)"
        assert len(worker.holding()) == partitions


class Renewals:
    """The times each of a worker's leases was renewed, from now on."""

    def __init__(self, worker: Worker) -> None:
        self._loop = asyncio.get_running_loop()
        self._started = self._loop.time()
        self.times: dict[int, list[float]] = {}
        renew = worker.leases.renew

        async def recorded(held: Lease) -> Lease | None:
            renewed = await renew(held)
            if renewed is not None:
                self.times.setdefault(held.partition, []).append(self._loop.time())
            return renewed

        worker.leases.renew = recorded  # type: ignore[method-assign]
        self._partitions = list(worker.owned)

    def longest_gap(self) -> float:
        """The longest time any lease went without a renewal, up to now."""
        now, gaps = self._loop.time(), []
        for k in self._partitions:
            times = [self._started, *self.times.get(k, []), now]
            gaps.append(max(b - a for a, b in pairwise(times)))
        return max(gaps)


class Blocker(threading.Thread):
    """Holds every checkpoint row locked for ``hold`` seconds from a session of its own, in a thread
    (the test's event loop may be the one waiting on it), noting what was folded meanwhile."""

    def __init__(self, engine: Engine, *, hold: float) -> None:
        super().__init__(name="blocker")
        self._engine, self._hold = engine, hold
        self.locked = threading.Event()
        self.folded_meanwhile: dict[int, int] | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._block()
        except BaseException as error:
            self.error = error  # the test fails on it instead of waiting for a lock that never came
            self.locked.set()
            raise

    def _block(self) -> None:
        with self._engine.connect() as conn, conn.begin():
            # The rows in the order a worker locks them (PostgreSQL), then a write (SQLite's lock), then what
            # the lock holds: locked in another order, the two connections could deadlock.
            conn.execute(select(checkpoints.c.name).order_by(checkpoints.c.name, checkpoints.c.partition).with_for_update())
            conn.execute(update(checkpoints).values(last_seq=checkpoints.c.last_seq))
            before = _positions(conn)
            self.locked.set()
            threading.Event().wait(self._hold)
            with self._engine.connect() as other:
                after = _positions(other)  # committed by others meanwhile (none can be)
            self.folded_meanwhile = {k: after[k] for k in before if after[k] != before[k]}


def _positions(conn: Connection) -> dict[tuple[str, int], int]:
    return {(row.name, row.partition): row.last_seq for row in conn.execute(select(checkpoints))}


def _rows(checksums: dict) -> dict:
    return {table: value for table, value in checksums.items() if table != "projection_checkpoints"}
