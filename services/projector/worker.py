"""A projector worker: folds the partitions of the log whose leases it holds, all of them with one runner.

Workers on any number of machines divide a partitioned log among them with the leases of
``services/projector/leases.py``. Each worker renews every lease it holds by compare-and-set on the
revision, a third of the lease time after the last renewal, in a task of its own that waits on nothing
else (a batch's database work runs in the writer's thread). The new revision is the partition's epoch
from then on: its checkpoint is moved with it, so that a worker whose lease lapsed (paused, cut off)
is refused at its next commit once another took the partition. Every look (a second at most), it:

- says it is alive (``worker.<name>`` in the bucket);
- takes the free partitions that rendezvous hashing gives it among the live workers;
- lets go of the partitions another live worker should have: they are given back (deleted) only
  after the runner's last commit, so the other worker takes them at once.

The partitions it holds are folded by one runner, as one projector folds an unpartitioned log: it
reads them with one consumer of the whole log when it holds every partition, or with a consumer
filtered to each (the server sends nothing else), and each batch, whatever partitions its events are
in, is one transaction that moves each partition's checkpoint by compare-and-set at that partition's
epoch. A runner per partition would make as many small commits as
partitions where one makes one, and on one machine a worker holds them all (``bench/latency.py
--partitions-ab``). When the partitions held change (one taken, given back or lost), the runner ends
its batch and a new one starts from their checkpoints, with consumers of its own (``consumer_name``).

A lease it cannot renew (another worker holds it, or it lapsed) is dropped without giving anything
back, and so is a partition whose commit was refused. On stop (SIGTERM) the runner ends its batch,
then every lease is given back at once and the worker leaves, so the others take over on their next
look instead of after the lease time. A killed worker's leases lapse within the lease time (the
bucket's TTL).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError

from projections.base import Projection
from services.log import ClaimLog
from services.projector.connections import end_stale_connections
from services.projector.errors import TRANSIENT, FencingError
from services.projector.leases import Lease, Leases, wanted
from services.projector.projector import LiveProjector, Projector
from services.store.generations import Generations

log = logging.getLogger(__name__)
LOOK_EVERY = 1.0  # seconds between looks at the live workers and the free partitions (at most)


@dataclass
class _Owned:
    """A partition this worker holds: its lease as last renewed."""

    lease: Lease
    renewed_at: float
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # one renewal or give-back at a time
    leaving: bool = False  # another worker should have it: given back after the runner's last commit


@dataclass
class _Fold:
    """The runner folding the partitions this worker holds, and its durable consumer."""

    runner: Projector
    task: asyncio.Task[None]
    stop: asyncio.Event
    consumer: str

    @property
    def partitions(self) -> frozenset[int]:
        return frozenset(self.runner.epochs)


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
        self._projections_for = projections_for  # projections made anew for each runner (nothing cached of another's claims)
        self._prefix, self._batch, self._generations, self._announce = consumer_prefix, batch, generations, announce
        self.lease_seconds = lease_seconds
        self.renew_every = lease_seconds / 3
        self.look_every = min(LOOK_EVERY, self.renew_every)
        self.partitions = claim_log.layout.partitions
        self.owned: dict[int, _Owned] = {}
        self._fold: _Fold | None = None
        self._runs = 0  # runners started: part of each one's consumer name
        self._lost = False  # a partition was lost since the runner started (its lease may be held again, anew)
        self._announced_at: float | None = None
        self._ending_until = 0.0  # until when each look ends the connections of workers gone (after taking partitions)

    @property
    def name(self) -> str:
        return self.leases.worker

    def holding(self) -> dict[int, int]:
        """The partitions this worker folds now, with the epoch each commits at."""
        return {k: owned.lease.epoch for k, owned in sorted(self.owned.items()) if not owned.leaving}

    async def run(self, stop: asyncio.Event) -> None:
        """Fold the partitions this worker holds until ``stop`` is set; then hand every one back.

        Raises what the runner failed with (other than losing a partition): the worker stops, every
        lease goes back, and the supervisor starts it again.
        """
        log.info("projector worker %s: %s partitions, leases of %ss", self.name, self.partitions, self.lease_seconds)
        renewing = asyncio.create_task(self._keep_renewing(), name=f"worker-{self.name}-renewals")
        try:
            while not stop.is_set():
                if renewing.done():
                    renewing.result()  # renewals stopped: what they failed with fails the worker
                await self._reap()
                try:
                    await self._look()
                except TRANSIENT as error:  # NATS is restarting or unreachable: the next look tries again
                    log.warning("worker %s: leases: %s: %s", self.name, type(error).__name__, error)
                await self._refold()
                await _wait_unless(stop, self.look_every)
        finally:
            await self._hand_over(renewing)

    async def _keep_renewing(self) -> None:
        """Renew each lease a third of the lease time after the last renewal, in a task of its own:
        neither a look nor a runner stopping after its batch (which may wait on the database) holds it up."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                for partition, owned in list(self.owned.items()):
                    if loop.time() - owned.renewed_at >= self.renew_every:
                        await self._renew(partition, owned)
            except TRANSIENT as error:  # NATS is restarting or unreachable: renewals retry on the next round
                log.warning("worker %s: renewing leases: %s: %s", self.name, type(error).__name__, error)
                self._drop_lapsed()
            await asyncio.sleep(self.look_every)

    async def _look(self) -> None:
        loop = asyncio.get_running_loop()
        if self._announced_at is None or loop.time() - self._announced_at >= self.renew_every:
            await self.leases.announce()
            self._announced_at = loop.time()
        workers = await self.leases.workers()
        mine = wanted(self.name, workers, self.partitions)
        for partition in sorted(mine - self.owned.keys()):
            lease = await self.leases.take(partition)
            if lease is not None:
                self.owned[partition] = _Owned(lease, loop.time())
                self._ending_until = loop.time() + self.lease_seconds  # its last owner may lapse from the live workers later
                log.info("worker %s: took partition %s at epoch %s", self.name, partition, lease.epoch)
        if loop.time() < self._ending_until:
            await self._end_stale_connections(workers)
        for partition in sorted(self.owned.keys() - mine):
            if not self.owned[partition].leaving:
                log.info("worker %s: partition %s belongs to another live worker now: handing it over", self.name, partition)
                self.owned[partition].leaving = True

    async def _end_stale_connections(self, workers: list[str]) -> None:
        """End the database connections of workers no longer live (``connections.py``): one paused inside a
        transaction would hold the rows this worker's batches of its partitions write."""
        try:
            ended = await asyncio.to_thread(functools.partial(end_stale_connections, self._engine, [*workers, self.name], stream=self._log.stream))
        except DBAPIError as error:
            if isinstance(error, TRANSIENT):
                raise
            log.warning("worker %s cannot end the connections of workers gone (%s): their locks last until their idle timeout", self.name, error)
            self._ending_until = 0.0
            return
        if ended:
            log.warning("worker %s: ended %s database connections of workers no longer live", self.name, ended)

    async def _renew(self, partition: int, owned: _Owned) -> None:
        async with owned.lock:
            if self.owned.get(partition) is not owned:
                return  # given back meanwhile
            renewed = await self.leases.renew(owned.lease)
            if renewed is None:
                self._lose(partition, "its lease lapsed or another worker holds it")
                return
            owned.lease, owned.renewed_at = renewed, asyncio.get_running_loop().time()
            if self._fold is not None and partition in self._fold.runner.epochs:
                self._fold.runner.epochs[partition] = renewed.epoch  # its next commits fence with the new revision

    async def _refold(self) -> None:
        """When the partitions to fold changed, end the runner's batch, give back the partitions
        leaving, and start a runner on those held."""
        folding = frozenset(k for k, owned in self.owned.items() if not owned.leaving)
        if self._fold is not None and self._fold.partitions == folding and len(folding) == len(self.owned) and not self._lost:
            return
        if self._fold is None and not self.owned:
            return
        self._settle(await self._stop_fold())
        self._lost = False
        await self._give_back({k: owned for k, owned in self.owned.items() if owned.leaving})
        if self.owned:
            self._start(frozenset(self.owned))

    def _start(self, partitions: frozenset[int]) -> None:
        epochs = {k: self.owned[k].lease.epoch for k in sorted(partitions)}
        self._runs += 1
        consumer = consumer_name(self._prefix, self.name, max(epochs.values()), self._runs)
        if self._generations is not None:
            runner: Projector = LiveProjector(self._log, self._generations, self._projections_for(), name=consumer, batch=self._batch, epochs=epochs)
        else:
            runner = Projector(self._log, self._engine, self._projections_for(), name=consumer, batch=self._batch, epochs=epochs)
        runner.announce = self._announce  # the live pages hear each commit (services/read_api/live_streams.py)
        stop = asyncio.Event()
        task = asyncio.create_task(runner.run(stop), name=f"worker-{self.name}-run-{self._runs}")
        self._fold = _Fold(runner, task, stop, consumer)
        log.info("worker %s: folding partitions %s", self.name, epochs)

    async def _stop_fold(self) -> BaseException | None:
        """End the runner after its batch in flight (commit or not), remove its consumer; what it failed with."""
        fold, self._fold = self._fold, None
        if fold is None:
            return None
        fold.stop.set()
        await asyncio.wait([fold.task])
        await self._forget_consumer(fold.consumer)
        for partition in fold.partitions:  # some partitions are read by a consumer each (PartitionConsumers)
            await self._forget_consumer(f"{fold.consumer}-p{partition}")
        error = None if fold.task.cancelled() else fold.task.exception()
        if isinstance(error, FencingError):
            log.warning("worker %s: a commit was refused: %s", self.name, error)
        return error

    def _lose(self, partition: int, why: str) -> None:
        """Stop folding a partition that is no longer this worker's; nothing goes back (the runner
        starts again without it)."""
        if self.owned.pop(partition, None) is not None:
            self._lost = True
            log.warning("worker %s: lost partition %s (%s)", self.name, partition, why)

    def _drop_lapsed(self) -> None:
        """Leases not renewed within the lease time are gone (another worker may hold them): stop folding them."""
        now = asyncio.get_running_loop().time()
        for partition, owned in list(self.owned.items()):
            if now - owned.renewed_at >= self.lease_seconds:
                self._lose(partition, f"not renewed for {self.lease_seconds}s")

    async def _reap(self) -> None:
        """A runner that ended on its own: a refused commit loses that partition; anything else fails the worker."""
        if self._fold is not None and self._fold.task.done():
            self._settle(await self._stop_fold())

    def _settle(self, error: BaseException | None) -> None:
        """What a stopped runner ended with: a refused commit or claim loses its partition (every one,
        when it names none); any other failure fails the worker."""
        if isinstance(error, FencingError):
            for partition in [error.partition] if error.partition is not None else list(self.owned):
                self._lose(partition, str(error))
        elif error is not None:
            raise error

    async def _give_back(self, leaving: dict[int, _Owned]) -> None:
        """Give back the leases of partitions no longer folded (after the runner's last commit)."""
        given = []
        for partition, owned in leaving.items():
            async with owned.lock:
                if self.owned.get(partition) is owned:
                    del self.owned[partition]
                    given.append(owned.lease)
        if not given:
            return
        try:
            await self.leases.give_back(given)
        except TRANSIENT as error:
            log.warning("worker %s could not give partitions %s back (%s): they lapse within %ss",
                        self.name, sorted(lease.partition for lease in given), error, self.lease_seconds)

    async def _forget_consumer(self, consumer: str) -> None:
        """Remove a runner's consumer once it stopped (a consumer is never taken over: see ``consumer_name``)."""
        try:
            await self._log.forget_consumer(consumer)
        except TRANSIENT as error:
            log.warning("worker %s: consumer %s stays until the server forgets it idle (%s)", self.name, consumer, error)

    async def _hand_over(self, renewing: asyncio.Task[None]) -> None:
        """Stop the runner, wait for its last commit (the leases still renewed), then give every lease back at once and leave."""
        try:
            error = await self._stop_fold()
        finally:
            renewing.cancel()
            await asyncio.gather(renewing, return_exceptions=True)
        if isinstance(error, FencingError):
            self._settle(error)  # the partition it names is another's: not given back
        elif error is not None:
            log.warning("worker %s: its runner stopped with %s: %s", self.name, type(error).__name__, error)
        held = [owned.lease for owned in self.owned.values()]
        self.owned.clear()
        try:
            await self.leases.give_back(held)
            await self.leases.leave()
        except TRANSIENT as error:
            log.warning("worker %s could not give its leases back (%s): they lapse within %ss", self.name, error, self.lease_seconds)
        else:
            log.info("worker %s stopped and gave back partitions %s", self.name, sorted(lease.partition for lease in held))


async def _wait_unless(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)


def consumer_name(prefix: str, worker: str, epoch: int, run: int) -> str:
    """The durable consumer of one runner of a worker: its own for each runner the worker starts.

    Two runners never pull from one consumer. Were the name the worker's or a partition's alone, the
    next runner (here or on another worker) would recreate the consumer while the last one still asks
    it for messages: those it received would never reach the new runner, whose checkpoints would then
    pass over them. ``epoch``, the highest lease revision of the partitions it folds, sets apart the
    runners of a worker started again under the same name; ``run`` counts this process's runners. A
    consumer left behind (a killed worker's) is removed by the server once idle (FORGET_IDLE_SECONDS)."""
    return f"{runs_of(prefix, worker)}{epoch}-r{run}"


def runs_of(prefix: str, worker: str) -> str:
    """What the names of ``worker``'s consumers begin with, whatever the runner."""
    return f"{prefix}-{worker}-e"
