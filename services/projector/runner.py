"""Consume, hand each batch to the writer, then ack: effects at the edge, exactly once."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import nats.errors
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, wait_exponential

from events import UnknownEventError
from projections.base import Record
from services.admission import Admitted, Gate, RegistryFact
from services.identity.keys import AttributionCache, load_attribution
from services.log import ClaimLog, Delivery, DurableConsumer
from services.log.consumer import PartitionConsumers
from services.log.names import notice_subject
from services.log.signing import Attribution
from services.projector.applied import applied_through
from services.projector.errors import NEVER_PARK, TRANSIENT, CannotIsolateError, FencingError
from services.projector.notices import encode_notice
from services.projector.writer import CheckpointedWriter, Entry, Refused

log = logging.getLogger(__name__)
BACKLOG_LINGER = 0.02  # seconds a batch may wait to fill while the projector is behind the log
FOLLOW_EVERY = 1.0  # seconds between looks at which read-model generation is active

__all__ = ["NEVER_PARK", "TRANSIENT", "CannotIsolateError", "FencingError", "Runner", "Scope", "to_entries"]


@dataclass(frozen=True)
class Scope:
    """Which events a runner folds: those of the whole log, of one partition or of several (the server
    filters them), and none after ``stop_at``."""

    stop_at: int | None = None
    partition: int | None = None  # one partition of the log only, filtered by the server; its own checkpoint
    partitions: tuple[int, ...] | None = None  # several partitions of the log, each with its checkpoint, committed together

    @property
    def parts(self) -> tuple[int, ...] | None:
        """The log partitions the runner folds (None: the whole log)."""
        return (self.partition,) if self.partition is not None else self.partitions


class Runner:
    """Reads batches from a durable consumer, hands each to the writer, acknowledges what it committed.

    A rebuild or a partial rebuild runs one as it is (with ``linger`` for full batches and a ``Scope``
    ending at the head); ``Projector`` and ``LiveProjector`` (``projector.py``) build one around a writer
    of their own, the live one following the active generation.
    """

    def __init__(
        self, log_: ClaimLog, writer: CheckpointedWriter, *, name: str, batch: int, linger: float = 0.0, scope: Scope = Scope(), epoch: int = 0,
        epochs: dict[int, int] | None = None,
    ) -> None:
        if scope.parts is None and writer.partitions != 1:
            raise ValueError(f"a writer of {writer.partitions} partitions cannot commit the whole log, which is one")
        self._log, self.writer, self.scope = log_, writer, scope
        self._name, self._batch = name, batch
        self._linger = linger  # seconds a batch may wait to fill: 0 live (latency), more for a replay
        self.checkpoint = 0  # the last sequence committed, as the database has it
        # The owner's epoch the writer fences each partition's checkpoint with: its lease's revision
        # (renewals raise it; the worker updates this mapping); 0 for a runner that owns its whole scope.
        parts = scope.parts if scope.parts is not None else (0,)
        self.epochs = epochs if epochs is not None else {part: epoch for part in parts}
        if sorted(self.epochs) != sorted(parts):
            raise ValueError(f"epochs for partitions {sorted(self.epochs)}, the runner folds {sorted(parts)}")
        # The partition of each delivered event, read from its subject when decoded: a batch of
        # several partitions' events is committed and announced each event against its own checkpoint.
        self._partition_of: Callable[[str], int] | None = log_.layout.partition_of_subject if len(parts) > 1 else None
        self.announce = False  # send a commit notice after each commit (services/projector/notices.py)
        self._keys = AttributionCache(self._load_attribution)

    async def _load_attribution(self) -> Attribution:
        # A log that carries the keys already (an in-memory log of events read before) is not asked again.
        fixed = getattr(self._log, "attribution", None)
        if isinstance(fixed, Attribution):
            return fixed
        return await load_attribution(self._log.nc, stream=self._log.stream)

    def load_checkpoint(self) -> int:
        """The last sequence every projection has applied in each of this runner's partitions (or the
        whole log), registering new projections at 0; the lowest of them, where its consumer starts.
        Checkpoints written for another number of partitions are divided anew first."""
        positions = []
        for part, epoch in list(self.epochs.items()):
            claimed = self.writer.claim(part, epoch=epoch)
            if isinstance(claimed, Refused):
                raise FencingError(claimed.reason, claimed.partition)
            positions.append(claimed)
        self.checkpoint = min(positions)
        return self.checkpoint

    async def _starting_point(self) -> int:
        """Where the consumer starts: after every event all the runner's partitions have applied.

        One partition (or none) starts at its checkpoint, and so does each of some partitions (a
        consumer each). All of them, read by one consumer of the whole log, start before the first
        event any of them has not applied, asked of the log per partition, so that one partition idle
        since long ago does not make the runner read again everything the others applied since."""
        lowest = await asyncio.to_thread(self.load_checkpoint)  # off the event loop, as every commit (the writer)
        parts = self.scope.parts
        if parts is None or len(parts) == 1 or not self._log.covers(parts):
            return lowest  # one consumer per partition, each started at its own checkpoint
        head = await self._log.head()  # before the look-ups: what a partition holds after them is above it
        self.checkpoint = await applied_through(self._log, {part: self.writer.position(part) or 0 for part in parts}, head=head)
        return self.checkpoint

    async def run(self, stop: asyncio.Event) -> None:
        """Apply events until ``stop`` is set, retrying with backoff (0.1 s, doubling to 5 s) while the
        database is unavailable; an outage after progress starts the backoff again."""
        while not stop.is_set():
            progress = self.checkpoint
            retrying = AsyncRetrying(
                retry=retry_if_exception_type(TRANSIENT),
                wait=wait_exponential(multiplier=0.1, max=5.0),
                stop=lambda _, since=progress: stop.is_set() or self.checkpoint != since,
                before_sleep=self._retrying,
                sleep=functools.partial(_sleep_unless, stop),
                reraise=True,
            )
            try:
                await retrying(self._consume, stop)
            except TRANSIENT as error:  # stopped, or it made progress since this outage began: a new one
                self._forget()
                if not stop.is_set():
                    log.warning("%s: %s; retrying at once (it applied events since the last failure)", type(error).__name__, error)

    def _retrying(self, state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        log.warning("%s: %s; retrying in %.1fs", type(error).__name__, error, state.upcoming_sleep)
        self._forget()

    async def run_until(self, seq: int, *, timeout: float | None = 120.0) -> None:
        """Apply events until the checkpoint reaches ``seq`` (for catch-up, tests and tools)."""
        stop = asyncio.Event()
        task = asyncio.create_task(self.run(stop))
        try:
            async with asyncio.timeout(timeout):
                while self.checkpoint < seq:
                    if task.done():
                        task.result()
                    await asyncio.sleep(0.005)
        finally:
            stop.set()
            await task

    async def _consume(self, stop: asyncio.Event) -> None:
        checkpoint = await self._starting_point()
        consumer = self._log.consumer(self._name, max_batch=self._batch, partitions=self.scope.parts)
        if isinstance(consumer, PartitionConsumers):
            await consumer.start_each({k: self.writer.position(k) or 0 for k in self.epochs})
        else:
            await consumer.start(checkpoint)
        loop = asyncio.get_running_loop()
        checked = loop.time()
        deliveries: list[Delivery] = []
        # The batch being written and committed, in the writer's thread, while this loop reads and
        # decodes the next one. Batches are still applied one at a time, in log order.
        writing: asyncio.Task | None = None
        try:
            while not stop.is_set():
                # Behind the log (the last batch was big), let a batch fill for a moment: one commit
                # then carries many events. Keeping up (small batches), hand each event over at once.
                behind = len(deliveries) >= self._batch // 4 if deliveries else False
                linger = self._linger or (BACKLOG_LINGER if behind else 0.0)
                deliveries = await consumer.next_batch(timeout=0.25, linger=linger)
                if writing is not None and writing.done():
                    writing, done = None, writing
                    done.result()  # a batch that failed while nothing more arrived
                if deliveries:
                    attribution = await self._keys.current(d.headers for d in deliveries)
                    decoded = self._decode(deliveries, attribution)
                    if writing is not None:
                        await writing  # raises what the previous batch failed with
                    writing = asyncio.create_task(self._apply(consumer, deliveries, decoded))
                if self.follows and loop.time() - checked > FOLLOW_EVERY:
                    checked = loop.time()
                    if writing is not None:
                        await writing
                        writing = None
                    if self._switched():
                        return  # run() starts again on the new generation, from its checkpoint
            if writing is not None:
                await writing
        finally:
            if writing is not None and not writing.done():
                # Stopped by an error or a cancellation: let the batch in flight end (its commit
                # holds the connection), whatever becomes of it.
                await asyncio.wait([writing])
            self.writer.close()
            await consumer.stop()

    follows = False  # whether the runner looks for a generation switch every FOLLOW_EVERY seconds

    def _switched(self) -> bool:
        """Whether the runner moved to another writer and must start again from its checkpoint."""
        return False

    def _decode(self, deliveries: list[Delivery], attribution: Attribution) -> list[Entry]:
        return to_entries(deliveries, stop_at=self.scope.stop_at, attribution=attribution, partition_of=self._partition_of)

    async def _apply(self, consumer: DurableConsumer | PartitionConsumers, deliveries: list[Delivery], entries: list[Entry]) -> None:
        """Commit a decoded batch with the checkpoint, then acknowledge it."""
        before = {part: self.writer.position(part) or 0 for part in self.epochs}
        outcome = await self.writer.commit(entries, owners=self.epochs)
        if isinstance(outcome, Refused):
            raise FencingError(outcome.reason, outcome.partition)
        self.checkpoint = max(self.checkpoint, outcome.checkpoint)
        if outcome.applied:
            # What this commit applied: above its partition's checkpoint (a batch of several partitions'
            # consumers is in no one order of sequences).
            if len(before) == 1:
                [above] = before.values()
                applied = [e.record for e in entries if isinstance(e.record, Record) and e.seq > above]
            else:
                applied = [e.record for e in entries if isinstance(e.record, Record) and e.seq > before[e.partition]]
            await self._announce(applied, outcome.checkpoint)
        await consumer.ack_batch(deliveries)

    async def _announce(self, records: list[Record], through: int) -> None:
        """Tell the API processes which claims the commit changed (``announce``: the live projector only)."""
        if not self.announce or not records:
            return
        try:
            await self._log.nc.publish(notice_subject(self._log.stream), encode_notice(records, through))
        except nats.errors.Error as error:  # committed already: a lost notice only delays a live page
            log.warning("could not send the commit notice through %s: %s", through, error)

    def _forget(self) -> None:
        self.writer.forget()


def to_entries(
    deliveries: Sequence[Delivery], *, stop_at: int | None = None, attribution: Attribution | None = None,
    partition_of: Callable[[str], int] | None = None,
) -> list[Entry]:
    """A batch as the writer takes it: each event admitted, or why the gate (services/admission/)
    refused it (``attribution``: the key registry it checks against; without it, no signature is
    required); none after ``stop_at``; each with its log partition (``partition_of`` its subject;
    without it, 0). Needs no database, so it overlaps the previous commit."""
    gate = Gate(attribution)
    entries = []
    for delivery in deliveries:
        if stop_at is not None and delivery.seq > stop_at:
            break
        record: Record | UnknownEventError | None
        verdict = gate.delivered(delivery)
        if isinstance(verdict, Admitted):
            record = Record(verdict.seq, verdict.stored_at, verdict.event)
        elif isinstance(verdict, RegistryFact):
            record = None  # the key registry's: no claim's event, but its partition's checkpoint passes it
        else:
            record = UnknownEventError(verdict.reason)  # recorded in unreadable_events: the refused set
        entries.append(Entry(delivery.seq, delivery.subject, record, partition_of(delivery.subject) if partition_of else 0))
    return entries


async def _sleep_unless(stop: asyncio.Event, delay: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=delay)
