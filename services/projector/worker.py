"""A projector worker: folds the partitions of the log whose leases it holds, one runner each.

Workers on any number of machines divide a partitioned log among them with the leases of
``services/projector/leases.py``. Each worker, every ``check`` seconds:

- says it is alive (``worker.<name>`` in the bucket) and renews every lease it holds by
  compare-and-set on the revision, a third of the lease time after the last renewal. The new revision
  is the partition's epoch from then on: its runner commits with it, so that a worker whose lease
  lapsed (paused, cut off) is refused at its next commit once another took the partition;
- takes the free partitions that rendezvous hashing gives it among the live workers, and starts a
  runner on each at the lease's revision. The runner's durable consumer is filtered to its partition
  (the server sends it nothing else) and is named after the partition, not the worker, so whoever
  owns the partition next starts it again at the partition's checkpoint;
- lets go of the partitions another live worker should have: their runner stops after its last
  commit, and only then is the lease given back (deleted), so the other worker takes it at once.

A lease it cannot renew (another worker holds it, or it lapsed) stops that partition's runner without
giving anything back. On stop (SIGTERM) every runner ends its batch, then every lease is given back at
once and the worker leaves, so the others take over on their next look instead of after the lease
time. A killed worker's leases lapse within the lease time (the bucket's TTL).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sqlalchemy import Engine

from projections.base import Projection
from services.log import ClaimLog
from services.projector.errors import TRANSIENT, FencingError
from services.projector.leases import Lease, Leases, wanted
from services.projector.live import Projector
from services.rebuild.generations import Generations

log = logging.getLogger(__name__)
LOOK_EVERY = 1.0  # seconds between looks at the live workers and the free partitions (at most)


@dataclass
class _Owned:
    """A partition this worker folds: its lease as last renewed, and its runner."""

    lease: Lease
    runner: Projector
    task: asyncio.Task[None]
    renewed_at: float
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # one renewal or give-back at a time
    leaving: bool = False  # its runner is stopping; the lease goes back after its last commit
    consumer: str = ""  # the durable consumer of this take of the partition (removed once given back)


class Worker:
    """One worker process's share of a partitioned log, kept by leases until it stops."""

    def __init__(
        self,
        claim_log: ClaimLog,
        leases: Leases,
        engine: Engine,
        projections_for: Callable[[], Sequence[Projection]],
        *,
        consumer_prefix: str,
        batch: int,
        lease_seconds: float,
        generations: Generations | None = None,
        announce: bool = True,
    ) -> None:
        if not claim_log.layout.partitioned:
            raise ValueError("workers divide a partitioned log; this log is unpartitioned (CLAIMLOG_PARTITIONS=0)")
        self._log, self.leases, self._engine = claim_log, leases, engine
        self._projections_for = projections_for  # one partition's projections, made anew for each runner
        self._prefix, self._batch, self._generations, self._announce = consumer_prefix, batch, generations, announce
        self.lease_seconds = lease_seconds
        self.renew_every = lease_seconds / 3
        self.look_every = min(LOOK_EVERY, self.renew_every)
        self.partitions = claim_log.layout.partitions
        self.owned: dict[int, _Owned] = {}
        self._announced_at: float | None = None
        self._leaving: set[asyncio.Task[None]] = set()

    @property
    def name(self) -> str:
        return self.leases.worker

    @property
    def _runner_batch(self) -> int:
        """Each runner's share of the worker's batch: a worker holding every partition has at most
        ``batch`` events delivered and not yet committed, as one projector would (a full batch per
        runner let one connection fall behind a backlog and lose deliveries)."""
        return max(1, self._batch // self.partitions)

    def holding(self) -> dict[int, int]:
        """The partitions this worker folds now, with the epoch each commits at."""
        return {k: owned.lease.epoch for k, owned in sorted(self.owned.items()) if not owned.leaving}

    async def run(self, stop: asyncio.Event) -> None:
        """Fold the partitions this worker holds until ``stop`` is set; then hand every one back.

        Raises what a runner failed with (other than losing its partition): the worker stops, its
        other runners end their batch and every lease goes back, and the supervisor starts it again.
        """
        log.info("projector worker %s: %s partitions, leases of %ss", self.name, self.partitions, self.lease_seconds)
        try:
            while not stop.is_set():
                self._reap()
                try:
                    await self._look()
                except TRANSIENT as error:  # NATS is restarting or unreachable: renewals retry on the next look
                    log.warning("worker %s: leases: %s: %s", self.name, type(error).__name__, error)
                    self._drop_lapsed()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=self.look_every)
        finally:
            await self._hand_over()

    async def _look(self) -> None:
        loop = asyncio.get_running_loop()
        if self._announced_at is None or loop.time() - self._announced_at >= self.renew_every:
            await self.leases.announce()
            self._announced_at = loop.time()
        for partition, owned in list(self.owned.items()):
            if loop.time() - owned.renewed_at >= self.renew_every:
                await self._renew(partition, owned)
        workers = await self.leases.workers()
        mine = wanted(self.name, workers, self.partitions)
        for partition in sorted(mine - self.owned.keys()):
            lease = await self.leases.take(partition)
            if lease is not None:
                self._start(lease)
        for partition in sorted(self.owned.keys() - mine):
            owned = self.owned[partition]
            if not owned.leaving:
                log.info("worker %s: partition %s belongs to another live worker now: handing it over", self.name, partition)
                owned.leaving = True
                task = asyncio.create_task(self._let_go(partition, owned))
                self._leaving.add(task)
                task.add_done_callback(self._leaving.discard)

    async def _renew(self, partition: int, owned: _Owned) -> None:
        async with owned.lock:
            if self.owned.get(partition) is not owned:
                return  # given back meanwhile
            renewed = await self.leases.renew(owned.lease)
            if renewed is None:
                self._lose(partition, owned, "its lease lapsed or another worker holds it")
                return
            owned.lease, owned.renewed_at = renewed, asyncio.get_running_loop().time()
            owned.runner.epoch = renewed.epoch  # its next commits fence with the new revision

    def _start(self, lease: Lease) -> None:
        partition = lease.partition
        consumer = consumer_name(self._prefix, partition, self.name, lease.epoch)
        runner = Projector(
            self._log, self._engine, self._projections_for(), name=consumer, batch=self._runner_batch,
            generations=self._generations, partition=partition, epoch=lease.epoch,
        )
        runner.announce = self._announce  # the live pages hear each commit (services/read_api/live.py)
        stop = asyncio.Event()
        task = asyncio.create_task(runner.run(stop), name=f"partition-{partition}")
        self.owned[partition] = _Owned(lease, runner, task, asyncio.get_running_loop().time(), stop, consumer=consumer)
        log.info("worker %s: folding partition %s at epoch %s", self.name, partition, lease.epoch)

    def _lose(self, partition: int, owned: _Owned, why: str) -> None:
        """Stop folding a partition that is no longer this worker's; nothing goes back."""
        log.warning("worker %s: lost partition %s (%s): stopping its runner", self.name, partition, why)
        owned.stop.set()
        if self.owned.get(partition) is owned:
            del self.owned[partition]

    def _drop_lapsed(self) -> None:
        """Leases not renewed within the lease time are gone (another worker may hold them): stop folding them."""
        now = asyncio.get_running_loop().time()
        for partition, owned in list(self.owned.items()):
            if now - owned.renewed_at >= self.lease_seconds:
                self._lose(partition, owned, f"not renewed for {self.lease_seconds}s")

    def _reap(self) -> None:
        """Runners that ended on their own: a refused commit loses the partition; anything else fails the worker."""
        for partition, owned in list(self.owned.items()):
            if not owned.task.done() or owned.leaving:
                continue
            error = owned.task.exception()
            if isinstance(error, FencingError):
                self._lose(partition, owned, str(error))
            elif error is not None:
                raise error
            else:
                self._lose(partition, owned, "its runner stopped")

    async def _let_go(self, partition: int, owned: _Owned) -> None:
        """Stop the partition's runner, and after its last commit give the lease back."""
        owned.stop.set()
        await asyncio.wait([owned.task])
        async with owned.lock:
            if self.owned.get(partition) is owned:
                del self.owned[partition]
                try:
                    await self.leases.give_back([owned.lease])
                except TRANSIENT as error:
                    log.warning("worker %s could not give partition %s back (%s): it lapses within %ss", self.name, partition, error, self.lease_seconds)
                await self._forget_consumers([owned])
        if not owned.task.cancelled() and owned.task.exception() is not None:
            log.warning("worker %s: partition %s stopped with %s", self.name, partition, owned.task.exception())

    async def _forget_consumers(self, given: list[_Owned]) -> None:
        """Remove the consumers of partitions given up (a consumer is never taken over: see ``consumer_name``)."""
        for one in given:
            try:
                await self._log.forget_consumer(one.consumer)
            except TRANSIENT as error:
                log.warning("worker %s: consumer %s stays until the server forgets it idle (%s)", self.name, one.consumer, error)

    async def _hand_over(self) -> None:
        """Stop every runner, wait for their last commits, then give every lease back at once and leave."""
        owned = list(self.owned.values())
        for one in owned:
            one.stop.set()
        if owned:
            await asyncio.wait([one.task for one in owned])
        held = [one.lease for one in owned if not one.task.cancelled() and not isinstance(one.task.exception(), FencingError)]
        self.owned.clear()
        await self._forget_consumers(owned)
        try:
            await self.leases.give_back(held)
            await self.leases.leave()
        except TRANSIENT as error:
            log.warning("worker %s could not give its leases back (%s): they lapse within %ss", self.name, error, self.lease_seconds)
        else:
            log.info("worker %s stopped and gave back partitions %s", self.name, sorted(lease.partition for lease in held))


def consumer_name(prefix: str, partition: int, worker: str, epoch: int) -> str:
    """The durable consumer of one take of a partition: its own for each worker and each lease taken.

    Two runners never pull from one consumer. Were the name the partition's alone, the next owner
    would recreate the consumer while the last one's runner still asks it for messages: those it
    received would never reach the new owner, whose checkpoint would then pass over them. A consumer
    left behind (a killed worker's) is removed by the server once idle (FORGET_IDLE_SECONDS)."""
    return f"{takes_of(prefix, partition, worker)}{epoch}"


def takes_of(prefix: str, partition: int, worker: str) -> str:
    """What the names of ``worker``'s consumers of ``partition`` begin with, whatever the epoch."""
    return f"{prefix}-p{partition}-{worker}-e"

