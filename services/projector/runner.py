"""Consume, apply, commit with the checkpoint, then ack: effects at the edge, exactly once."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import zlib
from collections.abc import Callable, Sequence

import nats.errors
import nats.js.errors
from sqlalchemy import Connection, Engine, RootTransaction, bindparam, insert, select, update
from sqlalchemy.exc import OperationalError

from events import UnknownEventError, decode
from projections.base import Projection, Record
from projections.tables import checkpoints, unreadable_events
from services.generations import Generations
from services.log import ClaimLog, Delivery, DurableConsumer, LogError
from services.projector.notices import encode_notice, notice_subject
from services.projector.parking import SYSTEMIC, Parking, isolate, lock_checkpoints, write_parked

log = logging.getLogger(__name__)
BACKLOG_LINGER = 0.02  # seconds a batch may wait to fill while the projector is behind the log
COMMIT_IN_THREAD_FROM = 200  # events in a batch from which its commit overlaps the next batch
FOLLOW_EVERY = 1.0  # seconds between looks at which read-model generation is active
# Failures that pass: the database or NATS is restarting. Anything else stops the projector.
TRANSIENT = (OperationalError, nats.errors.Error, nats.js.errors.Error, LogError, TimeoutError)


# Compare-and-set of the checkpoints, built once with bound parameters (cached compiled SQL).
ADVANCE = (
    update(checkpoints)
    .where(
        checkpoints.c.name.in_(bindparam("names", expanding=True)),
        checkpoints.c.share == bindparam("in_share"),
        checkpoints.c.shares == bindparam("of_shares"),  # rows divided for another number of shares are another's
        checkpoints.c.last_seq == bindparam("expected"),
    )
    .values(last_seq=bindparam("new"))
)


class FencingError(RuntimeError):
    """Another projector moved the checkpoint: this one must stop writing."""


class CannotIsolateError(RuntimeError):
    """A batch failed in a fold that cannot roll back what it holds in memory (a rebuild's write-behind
    worker), so the failing claim cannot be found and parked here: fold again without write-behind."""


# Failures that are no poison event: everything but these, raised by a projection, parks a claim.
NEVER_PARK = (*TRANSIENT, *SYSTEMIC, FencingError, CannotIsolateError)


class Projector:
    """Keeps a set of projections up to date with the log.

    With ``generations``, it keeps the active generation's tables and moves to a new one within
    ``FOLLOW_EVERY`` seconds of a switch (``claimlog replay``), resuming at that generation's checkpoint.
    """

    def __init__(
        self,
        log_: ClaimLog,
        engine: Engine,
        projections: Sequence[Projection],
        *,
        name: str,
        batch: int,
        generations: Generations | None = None,
        linger: float = 0.0,
        partition: tuple[int, int] | None = None,
        stop_at: int | None = None,
    ) -> None:
        self._log, self._engine, self._projections = log_, engine, list(projections)
        self._name, self._batch = name, batch
        self._generations = generations
        self._linger = linger  # seconds a batch may wait to fill: 0 live (latency), more for a replay
        # (k, n): apply only the events of claims in partition k of n (a parallel rebuild's share); the
        # checkpoint still moves over every event, since the others belong to other partitions.
        self._partition = partition
        self._stop_at = stop_at  # apply nothing after this sequence (a rebuild's share ends there)
        self.generation = generations.active_number() if generations is not None else 0
        if generations is not None:
            self._engine = generations.engine(self.generation)
        self.checkpoint = 0  # the last sequence committed, as the database has it
        self._parking = Parking()
        # The thread this projector commits in, while it runs (its own: two projectors of one process,
        # a rebuild's and the live one, must not queue behind each other's commits).
        self._commit_thread: concurrent.futures.ThreadPoolExecutor | None = None
        self.announce = False  # send a commit notice after each commit (services/projector/notices.py)

    def load_checkpoint(self) -> int:
        """The last sequence every projection has applied in this projector's share, registering new
        projections at 0; checkpoints written for another number of shares are divided anew first."""
        share, shares = self._share
        with self._engine.begin() as conn:
            lock_checkpoints(conn)  # the other shares start at the same moment, and may divide them too
            rows = conn.execute(select(checkpoints).where(checkpoints.c.name.in_([p.name for p in self._projections]))).all()
            if any(row.shares != shares for row in rows):
                rows = divide_checkpoints(conn, rows, shares=shares)
            known = {row.name: row.last_seq for row in rows if row.share == share}
            for projection in self._projections:
                if projection.name not in known:
                    conn.execute(insert(checkpoints).values(name=projection.name, share=share, shares=shares, version=projection.version, last_seq=0))
                    known[projection.name] = 0
            self._parking.load(conn)
        positions = {known[p.name] for p in self._projections}
        if len(positions) != 1:
            raise RuntimeError(f"projections are at different positions {sorted(positions)}: rebuild them with replay")
        self.checkpoint = positions.pop()
        return self.checkpoint

    @property
    def _share(self) -> tuple[int, int]:
        """(k, n): which share of the claims this projector folds, and of how many; (0, 1) for all."""
        return self._partition or (0, 1)

    async def run(self, stop: asyncio.Event) -> None:
        """Apply events until ``stop`` is set, retrying with backoff when the database is unavailable."""
        delay, failed_at = 0.1, -1
        while not stop.is_set():
            try:
                await self._consume(stop)
            except TRANSIENT as error:
                if self.checkpoint != failed_at:
                    delay = 0.1  # it made progress since the last failure: a new outage starts the backoff again
                failed_at = self.checkpoint
                log.warning("%s: %s; retrying in %.1fs", type(error).__name__, error, delay)
                self._forget()
                await _sleep_unless(stop, delay)
                delay = min(delay * 2, 5.0)

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
        checkpoint = self.load_checkpoint()
        consumer = self._log.consumer(self._name, max_batch=self._batch)
        await consumer.start(checkpoint)
        loop = asyncio.get_running_loop()
        checked = loop.time()
        deliveries: list[Delivery] = []
        # The batch being written and committed, while this loop reads and decodes the next one (the
        # commit releases the GIL). Batches are still applied one at a time, in log order.
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
                    decoded = self._decode(deliveries)
                    if writing is not None:
                        await writing  # raises what the previous batch failed with
                    writing = asyncio.create_task(self._apply(consumer, deliveries, decoded))
                if self._generations is not None and loop.time() - checked > FOLLOW_EVERY:
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
            if self._commit_thread is not None:
                self._commit_thread.shutdown()
                self._commit_thread = None
            await consumer.stop()

    def _committer(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._commit_thread is None:
            self._commit_thread = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="projector-commit")
        return self._commit_thread

    def _switched(self) -> bool:
        """Whether another generation became the active one; if so, write to it from now on."""
        assert self._generations is not None
        active = self._generations.active_number()
        if active == self.generation:
            return False
        log.info("read-model generation %s is now active (was %s): following it", active, self.generation)
        self._forget()
        self.generation, self._engine = active, self._generations.engine(active)
        return True

    def _decode(self, deliveries: list[Delivery]) -> dict[int, Record | UnknownEventError]:
        """The events of this projector's claims (all, unless it folds a partition), by sequence: a
        record, or why the event cannot be read. Needs no database, so it overlaps the previous commit."""
        owned = deliveries
        if self._partition is not None:
            part, parts = self._partition
            owned = [d for d in deliveries if claim_partition(d.subject, parts) == part]
        decoded: dict[int, Record | UnknownEventError] = {}
        for delivery in owned:
            try:
                decoded[delivery.seq] = Record(delivery.seq, delivery.stored_at, decode(delivery.data))
            except UnknownEventError as error:
                decoded[delivery.seq] = error
        return decoded

    async def _apply(self, consumer: DurableConsumer, deliveries: list[Delivery], decoded: dict[int, Record | UnknownEventError] | None = None) -> None:
        """Apply a batch (``decoded`` ahead of time, or now) and acknowledge it."""
        if decoded is None:
            decoded = self._decode(deliveries)
        # Only now is the checkpoint known to include the batch before: a redelivered event is skipped here.
        fresh = [d for d in deliveries if d.seq > self.checkpoint and (self._stop_at is None or d.seq <= self._stop_at)]
        if fresh:
            try:
                # The statements run on the event loop, not in a worker thread: two threads taking
                # turns on the GIL for every statement cost throughput. Only the commit,
                # one long release of the GIL, goes to a thread (``_commit``).
                await self._commit(fresh, decoded)
                await self._announce(fresh, decoded)
            except CannotIsolateError:
                raise  # forgetting would fail the same way
            except BaseException:
                self._forget()
                raise
        await consumer.ack_through(deliveries[-1])

    async def _commit(self, deliveries: list[Delivery], decoded: dict[int, Record | UnknownEventError]) -> None:
        records, unreadable = [], []
        owned = [d for d in deliveries if d.seq in decoded]
        for delivery in owned:
            record = decoded[delivery.seq]
            if isinstance(record, Record):
                records.append(record)
                continue
            unreadable.append({"seq": delivery.seq, "subject": delivery.subject, "reason": str(record)})
            log.error("unreadable event at sequence %s (%s): %s", delivery.seq, delivery.subject, record)
        subjects = {d.seq: d.subject for d in owned}
        new_checkpoint = deliveries[-1].seq
        try:
            with self._engine.connect() as conn:
                transaction = conn.begin()
                applying, parked = self._hold_back(conn, records, subjects)
                for projection in self._projections:
                    projection.apply_batch(conn, applying)
                self._finish(conn, unreadable, parked, new_checkpoint)
                # The commit of a large batch is the database's own work with the GIL released
                # (SQLite writing its log, PostgreSQL's round trip): meanwhile the event loop receives
                # and decodes the next batch. A small one (keeping up) commits here: handing it to a
                # thread and back would add to an event's way to the page (docs/architecture.md).
                # (Leaving the block without committing rolls the transaction back.)
                if len(deliveries) >= COMMIT_IN_THREAD_FROM:
                    await _in_thread(self._committer(), lambda: _commit_or_roll_back(transaction))
                else:
                    _commit_or_roll_back(transaction)
        except NEVER_PARK:
            raise
        except Exception as failure:
            # Only now, and only for this batch, is the batch taken apart to find the poison event.
            log.warning("a batch through sequence %s failed (%s: %s): finding the claim", new_checkpoint, type(failure).__name__, failure)
            self._isolate(records, unreadable, subjects, new_checkpoint, failure)
        self.checkpoint = new_checkpoint

    async def _announce(self, deliveries: list[Delivery], decoded: dict[int, Record | UnknownEventError]) -> None:
        """Tell the API processes which claims the commit changed (``announce``: the live projector only)."""
        if not self.announce:
            return
        records = [r for d in deliveries if isinstance(r := decoded.get(d.seq), Record)]
        if records:
            try:
                await self._log.nc.publish(notice_subject(self._log.stream), encode_notice(records, deliveries[-1].seq))
            except nats.errors.Error as error:  # committed already: a lost notice only delays a live page
                log.warning("could not send the commit notice through %s: %s", deliveries[-1].seq, error)

    def _hold_back(self, conn: Connection, records: list[Record], subjects: dict[int, str]) -> tuple[list[Record], list[dict]]:
        applying, parked, released = self._parking.hold_back(conn, records, subjects)
        if released:
            self._forget()  # a retry rewrote the released claims' rows: what is cached of them is stale
        return applying, parked

    def _isolate(self, records: list[Record], unreadable: list[dict], subjects: dict[int, str], new_checkpoint: int, failure: Exception) -> None:
        forget = self._forget_or_give_up(failure)
        forget()
        with self._engine.begin() as conn:
            lock_checkpoints(conn)  # before the first savepoint (see lock_checkpoints)
            applying, parked = self._hold_back(conn, records, subjects)
            rows, newly = isolate(conn, self._projections, applying, subjects, forget=forget, never_park=NEVER_PARK)
            self._finish(conn, unreadable, sorted(parked + rows, key=lambda row: row["seq"]), new_checkpoint)
        self._parking.claims.update(newly)

    def _forget_or_give_up(self, failure: Exception):
        def forget() -> None:
            try:
                self._forget()
            except RuntimeError as error:
                raise CannotIsolateError(str(error)) from failure
        return forget

    def _finish(self, conn: Connection, unreadable: list[dict], parked: list[dict], new_checkpoint: int) -> None:
        if unreadable:
            conn.execute(insert(unreadable_events), unreadable)
        write_parked(conn, parked)
        self._advance(conn, new_checkpoint)

    def _advance(self, conn: Connection, new_checkpoint: int) -> None:
        names = [p.name for p in self._projections]
        share, shares = self._share
        moved = conn.execute(
            ADVANCE, {"names": names, "in_share": share, "of_shares": shares, "expected": self.checkpoint, "new": new_checkpoint}
        ).rowcount
        if moved != len(names):
            raise FencingError(
                f"checkpoint of {names} (share {share} of {shares}) is no longer at {self.checkpoint}: another projector is writing"
            )

    def _forget(self) -> None:
        for projection in self._projections:
            projection.forget()


def divide_checkpoints(conn: Connection, rows: Sequence, *, shares: int) -> list:
    """Replace checkpoints written for another number of shares with ``shares`` rows per projection, at
    the position they all stand at; an event folded twice would count twice, so they must stand at one.
    (``services/projector/shares.py`` brings them there before starting another number of shares.)"""
    positions = {row.last_seq for row in rows}
    if len(positions) > 1:
        was = sorted({row.shares for row in rows})
        raise RuntimeError(
            f"the checkpoints were written by {' and '.join(map(str, was))} shares of the claims, standing at different "
            f"positions {sorted(positions)}: run the projector with CLAIMLOG_PROJECTOR_SHARES={was[-1]} until they stand at one, "
            "or let `claimlog projector` bring them there"
        )
    versions = {row.name: row.version for row in rows}
    seq = positions.pop()
    conn.execute(checkpoints.delete().where(checkpoints.c.name.in_(list(versions))))
    divided = [
        {"name": name, "share": share, "shares": shares, "version": version, "last_seq": seq}
        for name, version in versions.items()
        for share in range(shares)
    ]
    conn.execute(insert(checkpoints), divided)
    log.info("checkpoints of %s divided for CLAIMLOG_PROJECTOR_SHARES=%s at sequence %s", sorted(versions), shares, seq)
    return conn.execute(select(checkpoints).where(checkpoints.c.name.in_(list(versions)))).all()


def claim_partition(subject: str, parts: int) -> int:
    """Which of ``parts`` partitions a stored event's claim falls in (by the claim id in its subject)."""
    claim = subject.split(".", 2)[1] if subject.count(".") >= 1 else subject
    return zlib.crc32(claim.encode()) % parts


def _commit_or_roll_back(transaction: RootTransaction) -> None:
    """Commit; if that fails, roll back, as ``engine.begin()`` does (a PostgreSQL connection would
    otherwise go back to the pool inside its failed transaction)."""
    try:
        transaction.commit()
    except BaseException:
        transaction.rollback()
        raise


async def _in_thread(executor: concurrent.futures.Executor, call: Callable[[], object]) -> None:
    """Run a blocking call in a worker thread. A cancelled caller still waits for the call to end, so
    that the connection it uses is never in two threads at once."""
    future = executor.submit(call)
    try:
        await asyncio.wrap_future(future)
    except asyncio.CancelledError:
        concurrent.futures.wait([future])
        raise


async def _sleep_unless(stop: asyncio.Event, delay: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=delay)
