"""Projector workers (``claimlog projector`` on a partitioned log) as separate processes on PostgreSQL,
killed, joined, paused and stopped while they fold a backlog.

Each scenario publishes a small partitioned log to an embedded nats-server of its own, runs workers
as the projector role, and ends with every partition applied to its last event and the tables equal
to a clean replay of the whole log by one in-process projector (checkpoints aside: the workers' are
per partition). Lease times are short here (CLAIMLOG_LEASE_SECONDS) so that lapses happen within
the test.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import Engine, select

from projections.tables import checkpoints
from services.log import ClaimLog, connect
from services.projector.leases import Leases, ensure_bucket
from services.runtime.embedded import EmbeddedNats
from tests.conftest import _postgres_database
from tests.faults.harness import (
    CleanReplay,
    checksums,
    log_spec,
    migrated,
    publish_workload,
    sigkill,
    start_projector,
    stop,
)

PARTITIONS = 4
CLAIMS = 1_500  # x 10 events
BATCH = 100


@dataclass
class Scene:
    nats: EmbeddedNats
    claim_log: ClaimLog  # as admin: reads the log and the leases
    head: int
    database: str
    engine: Engine
    clean: CleanReplay
    logs: Path

    def worker(self, name: str, *, lease: float, slow: str | None = None, stall: Path | None = None) -> subprocess.Popen[bytes]:
        return start_projector(
            self.nats.url_for("projector"), self.database, batch=BATCH, slow=slow, stall=stall, partitions=PARTITIONS,
            log_to=self.logs / f"{name}.log", settings={"CLAIMLOG_WORKER_NAME": name, "CLAIMLOG_LEASE_SECONDS": str(lease)},
        )

    def log_of(self, name: str) -> str:
        return (self.logs / f"{name}.log").read_text(errors="replace")

    leases: Leases | None = None

    async def holders(self) -> dict[int, str]:
        assert self.leases is not None
        return {k: owner for k, (owner, _) in (await self.leases.holders(PARTITIONS)).items()}

    async def open_leases(self, lease: float) -> None:
        """The bucket as `claimlog up` makes it (as admin), with this scenario's lease time."""
        js = self.claim_log.nc.jetstream()
        self.leases = Leases(await ensure_bucket(js, ttl=lease), "observer", js=js)

    def positions(self) -> dict[int, int]:
        """Each partition's checkpoint (the lowest over the projections)."""
        with self.engine.connect() as conn:
            rows = conn.execute(select(checkpoints).where(checkpoints.c.partitions == PARTITIONS)).all()
        at: dict[int, int] = {}
        for row in rows:
            at[row.partition] = min(at.get(row.partition, row.last_seq), row.last_seq)
        return at

    def epochs(self) -> dict[int, int]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(checkpoints.c.partition, checkpoints.c.epoch).where(checkpoints.c.partitions == PARTITIONS)).all()
        return {share: epoch for share, epoch in rows}

    async def last_of_each_partition(self) -> dict[int, int]:
        last: dict[int, int] = {}
        after = 0
        while after < self.head:
            stored = await self.claim_log.read_log(after_seq=after, limit=5000)
            for event in stored:
                last[self.claim_log.layout.partition_of_subject(event.subject)] = event.seq
            after = stored[-1].seq
        return last

    async def until(self, condition: Callable[[], object], what: str, *, timeout: float, workers: list[subprocess.Popen[bytes]] = ()) -> None:
        async with asyncio.timeout(timeout):
            while not await _value(condition()):
                for worker in workers:
                    assert worker.poll() is None, f"a worker exited with {worker.returncode} waiting until {what}"
                await asyncio.sleep(0.05)

    async def all_applied_and_equal_a_clean_replay(self, workers: list[subprocess.Popen[bytes]]) -> None:
        last = await self.last_of_each_partition()
        await self.until(lambda: all(self.positions().get(k, 0) >= seq for k, seq in last.items()), "every partition is applied", timeout=150, workers=workers)
        assert {k: self.positions()[k] for k in last} == last  # nothing beyond the log: no event folded twice moves past it
        clean = await self.clean.to(self.head)
        assert _tables(checksums(self.engine)) == _tables(clean), "the workers' tables differ from a clean replay"


async def _value(value: object) -> object:
    return await value if asyncio.iscoroutine(value) else value


def _tables(sums: dict[str, str]) -> dict[str, str]:
    return {table: value for table, value in sums.items() if table != "projection_checkpoints"}


@pytest.fixture
async def scene(tmp_path: Path) -> AsyncIterator[Scene]:
    nats = EmbeddedNats(tmp_path / "nats", sync="30s")
    nats.start()
    try:
        admin = nats.url_for("admin")
        head = await publish_workload(admin, claims=CLAIMS, per_claim=10, partitions=PARTITIONS)
        nc = await connect(admin, name="faults-workers")
        try:
            for database in _postgres_database():
                for clean_database in _postgres_database():
                    engine, clean_engine = migrated(database), migrated(clean_database)
                    try:
                        claim_log = ClaimLog(nc, log_spec(PARTITIONS))
                        clean = CleanReplay(claim_log, clean_engine, name="clean-replay")
                        yield Scene(nats, claim_log, head, database, engine, clean, tmp_path)
                    finally:
                        engine.dispose()
                        clean_engine.dispose()
        finally:
            await nc.close()
    finally:
        nats.stop()


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_a_worker_joining_mid_backlog_takes_partitions_and_a_killed_ones_move_within_the_lease(scene: Scene):
    lease = 3.0
    await scene.open_leases(lease)
    first = scene.worker("first", lease=lease, slow="0.2:600")  # slowed: the backlog outlasts the joining
    second = None
    try:
        await scene.until(lambda: sum(scene.positions().values()) > 0, "the first worker commits", timeout=60, workers=[first])
        assert set((await scene.holders()).values()) == {"first"}
        second = scene.worker("second", lease=lease)
        await scene.until(held_by(scene, "first", "second"), "the joining worker takes partitions", timeout=60, workers=[first, second])
        before = scene.positions()
        sigkill(first)
        # The killed worker's leases lapse within the lease time; the second takes them and goes on
        # from their checkpoints.
        await scene.until(held_by(scene, "second", every=True), "the second holds every partition", timeout=60, workers=[second])
        await scene.all_applied_and_equal_a_clean_replay([second])
        assert all(scene.positions()[k] >= seq for k, seq in before.items())
    finally:
        for worker in (first, second):
            if worker is not None:
                stop(worker)


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_a_worker_paused_past_its_lease_is_refused_at_its_next_commit_and_nothing_is_applied_twice(scene: Scene):
    lease = 2.0
    await scene.open_leases(lease)
    # The paused worker holds each batch for a moment before committing it: paused there, it wakes
    # with a batch to commit at the epoch of a lease that another worker holds by then.
    paused = scene.worker("paused", lease=lease, slow="0.3:600")
    other = None
    try:
        await scene.until(lambda: sum(scene.positions().values()) > 0, "the paused worker commits", timeout=60, workers=[paused])
        taken = scene.epochs()
        paused.send_signal(signal.SIGSTOP)
        other = scene.worker("other", lease=lease)
        # The other worker takes every partition once the paused one's leases lapse, and claims each
        # checkpoint at its own, higher epoch.
        await scene.until(held_by(scene, "other", every=True), "the other holds every partition", timeout=60, workers=[other])
        await scene.until(lambda: all(scene.epochs().get(k, 0) > epoch for k, epoch in taken.items()), "the other claims the checkpoints", timeout=60, workers=[other])
        paused.send_signal(signal.SIGCONT)
        await scene.until(lambda: "owned at epoch" in scene.log_of("paused"), "the paused worker's commit is refused", timeout=60, workers=[other])
        # Awake, it is a live worker again and takes its share anew, at new epochs, from the checkpoints.
        await scene.all_applied_and_equal_a_clean_replay([paused, other])
    finally:
        if paused.poll() is None:
            paused.send_signal(signal.SIGCONT)
        for worker in (paused, other):
            if worker is not None:
                stop(worker)


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_a_worker_stopped_by_sigterm_hands_its_partitions_over_at_once(scene: Scene):
    lease = 600.0  # a handover that waited for the lease to lapse would outlast the test
    await scene.open_leases(lease)
    staying = scene.worker("staying", lease=lease, slow="0.1:600")
    leaving = scene.worker("leaving", lease=lease, slow="0.1:600")
    try:
        await scene.until(held_by(scene, "staying", "leaving"), "both hold partitions", timeout=60, workers=[staying, leaving])
        leaving.terminate()
        assert leaving.wait(30) == 0
        assert "gave back partitions" in scene.log_of("leaving")
        await scene.until(held_by(scene, "staying", every=True), "the staying worker holds every partition", timeout=30, workers=[staying])
        await scene.all_applied_and_equal_a_clean_replay([staying])
    finally:
        for worker in (staying, leaving):
            stop(worker)


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_a_worker_stopped_inside_its_transaction_holds_up_none_of_another_workers_partitions(scene: Scene):
    lease = 3.0
    await scene.open_leases(lease)
    trigger = scene.logs / "stall"
    # Both fold a backlog, slowed, so that each still has events to fold when one of them stops.
    stopped = scene.worker("stopped", lease=lease, slow="0.2:600", stall=trigger)
    other = scene.worker("other", lease=lease, slow="0.1:600")
    watch = None
    try:
        await scene.until(held_by(scene, "stopped", "other"), "both hold partitions", timeout=60, workers=[stopped, other])
        await scene.until(lambda: min(scene.positions().values(), default=0) > 0, "every partition commits", timeout=60, workers=[stopped, other])
        trigger.touch()
        # The stopped worker's session stays in its transaction with its batch's folded_events rows
        # locked; the other takes its partitions once their leases lapse and folds the same events.
        await scene.until(trigger.with_suffix(".stopped").exists, "the worker stops inside its transaction", timeout=60, workers=[other])
        watch = Unheld(scene)
        watch.start()
        allowed = lease  # from a lapse to the other's next look (a second here), with room to spare

        def applied_and_never_long_unheld() -> bool:
            assert watch.longest() < allowed, f"a partition stayed unheld {watch.longest():.1f}s (allowed {allowed}s)"
            return all(scene.positions().get(k, 0) >= seq for k, seq in last.items())

        last = await scene.last_of_each_partition()
        await scene.until(applied_and_never_long_unheld, "the other folds every partition", timeout=120, workers=[other])
        assert "lost partition" not in scene.log_of("other"), "the other worker lost a lease of its own"
        stopped.send_signal(signal.SIGCONT)
        await scene.all_applied_and_equal_a_clean_replay([other])
    finally:
        if watch is not None:
            await watch.stop()
        if stopped.poll() is None:
            stopped.send_signal(signal.SIGCONT)
        for worker in (stopped, other):
            stop(worker)


class Unheld:
    """Watches the leases: the longest time any partition went without a holder."""

    def __init__(self, scene: Scene) -> None:
        self._scene, self._since, self._longest = scene, {}, 0.0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._watch())

    def longest(self) -> float:
        now = asyncio.get_running_loop().time()
        return max([self._longest, *(now - since for since in self._since.values())])

    async def _watch(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            held = await self._scene.holders()
            now = loop.time()
            for k in range(PARTITIONS):
                if k in held:
                    if k in self._since:
                        self._longest = max(self._longest, now - self._since.pop(k))
                else:
                    self._since.setdefault(k, now)
            await asyncio.sleep(0.05)

    async def stop(self) -> None:
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


def held_by(scene: Scene, *names: str, every: bool = False) -> Callable[[], object]:
    """A condition: the live leases are held by exactly ``names`` (and, with ``every``, all partitions are held)."""
    async def holding() -> bool:
        holders = await scene.holders()
        return set(holders.values()) == set(names) and (not every or len(holders) == PARTITIONS)
    return holding
