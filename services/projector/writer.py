"""The exactly-once step: a batch and its partition's checkpoint in one SQL transaction, fenced by epoch.

``CheckpointedWriter.commit`` applies the events of a batch above the partition's checkpoint, skips
those at or below it (a redelivery), and moves the checkpoint by compare-and-set in the same
transaction. The compare-and-set also holds the owner's epoch: a commit whose epoch is lower than the
row's, or that finds the checkpoint moved by another writer, is rolled back and ``Refused``. The
caller acknowledges the batch to the log only after ``Committed``: the runners
(``services/projector/runner.py``) around this writer decide where batches come from.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

from sqlalchemy import Connection, Engine, RootTransaction, bindparam, insert, select, update

from events import UnknownEventError
from projections.base import Projection, Record
from projections.tables import checkpoints, unreadable_events
from services.projector.errors import NEVER_PARK, CannotIsolateError
from services.projector.parking import Parking, isolate, lock_checkpoints, write_parked
from services.projector.positions import claim_rows
from services.projector.repeats import without_repeats
from services.projector.rules import RuleCheck

log = logging.getLogger(__name__)
T = TypeVar("T")

# Compare-and-set of a partition's checkpoints, built once with bound parameters (cached compiled SQL).
ADVANCE = (
    update(checkpoints)
    .where(
        checkpoints.c.name.in_(bindparam("names", expanding=True)),
        checkpoints.c.partition == bindparam("part"),  # not the column's own name: an UPDATE reserves it
        checkpoints.c.partitions == bindparam("parts"),  # rows divided for another number of partitions are another's
        checkpoints.c.last_seq == bindparam("expected"),
        checkpoints.c.epoch <= bindparam("owner"),
    )
    .values(last_seq=bindparam("new"), epoch=bindparam("owner"))
)


class Entry(NamedTuple):
    """One delivered event as the writer takes it: its place in the log, its subject, what it decoded
    to (or why it cannot be read), and the log
    partition it is stored in (read from its subject once, when it is decoded; ``None`` when not given,
    which a batch committed for one partition does not need and one of several partitions refuses)."""

    seq: int
    subject: str
    record: Record | UnknownEventError | None  # None: a key-registry change, which moves the checkpoint only
    partition: int | None = None


@dataclass(frozen=True)
class Committed:
    """The batch is in the tables and the checkpoint stands at ``checkpoint``: acknowledge it."""

    checkpoint: int
    applied: int
    skipped: int


@dataclass(frozen=True)
class Refused:
    """Nothing was written: the partition's row is at ``epoch`` and ``checkpoint``, which this owner
    did not expect (a newer owner took the partition, or another writer moved it)."""

    checkpoint: int
    epoch: int
    reason: str
    partition: int | None = None  # the partition whose row it is


class CheckpointedWriter:
    """Writes batches of one set of projections, each partition's with its checkpoint, exactly once."""

    def __init__(self, engine: Engine, projections: Sequence[Projection], *, partitions: int = 1) -> None:
        self.engine, self.projections, self.partitions = engine, list(projections), partitions
        self._names = [p.name for p in self.projections]
        self._positions: dict[int, int] = {}  # partition -> checkpoint as this writer last committed it
        self._parking = Parking()
        self._rules = RuleCheck(self.projections)
        self._rows: dict[int, tuple] = {}
        # The thread this writer does its database work in (its own: two writers of one process must
        # not queue behind each other's commits).
        self._commit_thread: concurrent.futures.ThreadPoolExecutor | None = None

    def claim(self, partition: int, *, epoch: int = 0) -> int | Refused:
        """Take ``partition`` at ``epoch``: its checkpoint (registering new projections at 0), with the
        row's epoch raised to ``epoch`` so that an older owner's commits are refused from now on."""
        with self.engine.begin() as conn:
            # Its own rows only: other workers' partitions commit meanwhile (a claim that locked every
            # row waited on their commits, and could deadlock with one holding rows in another order).
            # Rows written for another number of partitions are all replaced, so then it takes them all.
            lock_checkpoints(conn, *(() if self._dividing(conn) else self._row(partition)))
            rows = claim_rows(conn, self.projections, partition=partition, partitions=self.partitions)
            if (newer := max(row.epoch for row in rows)) > epoch:
                return Refused(rows[0].last_seq, newer, f"partition {partition} is owned at epoch {newer}, above {epoch}", partition)
            positions = {row.last_seq for row in rows}
            if len(positions) != 1:
                raise RuntimeError(f"projections are at different positions {sorted(positions)}: rebuild them with replay")
            conn.execute(update(checkpoints).where(*self._row(partition)).values(epoch=epoch))
            self._parking.load(conn)
        self._positions[partition] = positions.pop()
        return self._positions[partition]

    def _dividing(self, conn: Connection) -> bool:
        """Whether the checkpoints were written for another number of partitions (``claim_rows`` divides them anew)."""
        other = select(checkpoints.c.name).where(checkpoints.c.name.in_(self._names), checkpoints.c.partitions != self.partitions)
        return conn.execute(other.limit(1)).first() is not None

    def position(self, partition: int) -> int | None:
        """The partition's checkpoint as this writer last claimed or committed it."""
        return self._positions.get(partition)

    async def commit(
        self, batch: Sequence[Entry], *, partition: int = 0, epoch: int = 0, owners: Mapping[int, int] | None = None
    ) -> Committed | Refused:
        """Apply the events of ``batch`` above their partition's checkpoint and move each checkpoint to its
        partition's last event in the batch, all in one transaction; or change nothing and say why (``Refused``).

        ``owners`` (partition -> epoch) commits a batch of several partitions' events at once (one
        worker's: ``services/projector/worker.py``), each partition's checkpoint moved by compare-and-set
        at its own epoch; without it the batch is ``partition``'s, at ``epoch``.

        All of its database work runs in the writer's thread: meanwhile the event loop renews a
        worker's leases and reads the next batch, however long a statement waits."""
        if owners is None:
            owners = {partition: epoch}
        elif len(owners) > 1:
            _refuse_others(batch, owners)  # before claiming any of them
        return await _in_thread(self._committer(), functools.partial(self._commit, batch, owners))

    def _commit(self, batch: Sequence[Entry], owners: Mapping[int, int]) -> Committed | Refused:
        expected: dict[int, int] = {}
        for part, owner in owners.items():
            at = self._positions.get(part)
            if at is None:
                claimed = self.claim(part, epoch=owner)
                if isinstance(claimed, Refused):
                    return claimed
                at = claimed
            expected[part] = at
        if len(expected) == 1:
            [(only, at)] = expected.items()
            fresh = [entry for entry in batch if entry.seq > at]
            moving = {only: (at, fresh[-1].seq)} if fresh else {}
        else:
            fresh, moving = [], {}
            for entry in batch:
                part = entry.partition
                if entry.seq > expected[part]:
                    fresh.append(entry)
                    moving[part] = (expected[part], entry.seq)  # each partition to its last event in the batch
        if not fresh:  # a redelivery: where the checkpoint stands (one partition), or where the batch ends
            return Committed(batch[-1].seq if batch and len(expected) > 1 else min(expected.values()), 0, len(batch))
        try:
            refused = self._write(fresh, moving=moving, owners=owners)
        except CannotIsolateError:
            raise  # forgetting would fail the same way
        except BaseException:
            self.forget()
            raise
        if refused is not None:
            self.forget()
            del self._positions[refused]
            return self._refusal(refused, epoch=owners[refused], expected=expected[refused])
        for part, (_, to) in moving.items():
            self._positions[part] = to
        return Committed(batch[-1].seq, len(fresh), len(batch) - len(fresh))

    def forget(self) -> None:
        """Drop what the projections hold in memory (a transaction they built it for did not commit)."""
        for projection in self.projections:
            projection.forget()

    def close(self) -> None:
        """Let the commit thread go (the writer can be used again: it starts another)."""
        if self._commit_thread is not None:
            self._commit_thread.shutdown()
            self._commit_thread = None

    def _write(self, fresh: list[Entry], *, moving: dict[int, tuple[int, int]], owners: Mapping[int, int]) -> int | None:
        """Apply ``fresh`` and move the ``moving`` partitions' checkpoints (from, to); the partition whose
        compare-and-set failed (nothing written), or None."""
        records, unreadable, subjects = _sort(fresh)
        through = fresh[-1].seq
        advances = [
            {"names": self._names, "part": part, "parts": self.partitions, "expected": at, "new": to, "owner": owners[part]}
            for part, (at, to) in moving.items()
        ]
        # The committing partitions' checkpoint rows, as a condition; built only when a batch needs
        # to lock them (it touches a parked claim, or one of its events fails).
        rows = functools.partial(self._row, *moving)
        try:
            with self.engine.connect() as conn:
                transaction = conn.begin()
                applying, parked, repeats = self._hold_back(conn, records, subjects, rows)
                for projection in self.projections:
                    projection.apply_batch(conn, applying)
                if (refused := self._finish(conn, unreadable + repeats, parked, advances)) is not None:
                    transaction.rollback()
                    self._rules.forget()
                    return refused
                _commit_or_roll_back(transaction)
                self._rules.committed()
                return None
        except NEVER_PARK:
            raise
        except Exception as failure:
            # Only now, and only for this batch, is the batch taken apart to find the poison event.
            log.warning("a batch through sequence %s failed (%s: %s): finding the claim", through, type(failure).__name__, failure)
            return self._isolate(records, unreadable, subjects, advances, rows, failure)

    def _hold_back(
        self, conn: Connection, records: list[Record], subjects: dict[int, str], rows: Callable[[], tuple]
    ) -> tuple[list[Record], list[dict], list[dict]]:
        """The records to apply, the parked events' rows, and the unreadable rows of repeats (found
        before parking: a repeat is never folded, parked or not) and of events against the rules (found
        with them, but for a parked claim's, whose page is behind its events: its retry judges them)."""
        was_parked = set(self._parking.claims)
        judges = self._rules.judges(conn, records, later=was_parked)
        records, refused = without_repeats(conn, records, subjects, judges=judges)
        applying, parked, released = self._parking.hold_back(conn, records, subjects, rows=rows)
        if released:
            self.forget()  # a retry rewrote the released claims' rows: what is cached of them is stale
            freed = [r for r in applying if r.event.claim_id in was_parked]
            if freed:  # not judged above, as parked: judged now, against the pages the retry wrote
                kept, late = self._rules.judge(conn, freed, subjects)
                applying = [r for r in applying if r.event.claim_id not in was_parked or r in kept]
                refused = sorted(refused + late, key=lambda row: row["seq"])
        return applying, parked, refused

    def _isolate(
        self, records: list[Record], unreadable: list[dict], subjects: dict[int, str], advances: list[dict], rows: Callable[[], tuple],
        failure: Exception,
    ) -> int | None:
        forget = _forget_or_give_up(self.forget, failure)
        forget()
        with self.engine.connect() as conn:
            transaction = conn.begin()
            lock_checkpoints(conn, *rows())  # the committing partitions', before the first savepoint
            applying, parked, repeats = self._hold_back(conn, records, subjects, rows)
            parked_now, newly = isolate(conn, self.projections, applying, subjects, forget=forget, never_park=NEVER_PARK)
            if (refused := self._finish(conn, unreadable + repeats, sorted(parked + parked_now, key=lambda row: row["seq"]), advances)) is not None:
                transaction.rollback()
                self._rules.forget()
                return refused
            _commit_or_roll_back(transaction)
            self._rules.committed()
        self._parking.claims.update(newly)
        return None

    def _finish(self, conn: Connection, unreadable: list[dict], parked: list[dict], advances: list[dict]) -> int | None:
        """Write the unreadable and parked rows and move each partition's checkpoints; the first
        partition whose compare-and-set failed, or None."""
        if unreadable:
            conn.execute(insert(unreadable_events), unreadable)
        write_parked(conn, parked)
        for advance in advances:
            if conn.execute(ADVANCE, advance).rowcount != len(self._names):
                return advance["part"]
        return None

    def _refusal(self, partition: int, *, epoch: int, expected: int) -> Refused:
        with self.engine.connect() as conn:
            row = conn.execute(select(checkpoints.c.last_seq, checkpoints.c.epoch).where(*self._row(partition))).first()
        at, owner = (row.last_seq, row.epoch) if row is not None else (0, 0)
        if owner > epoch:
            return Refused(at, owner, f"partition {partition} is owned at epoch {owner}, above {epoch}", partition)
        return Refused(
            at, owner, f"checkpoint of {self._names} (partition {partition} of {self.partitions}) is no longer at {expected}: another projector is writing",
            partition,
        )

    def _row(self, *partitions: int) -> tuple:
        """The checkpoint rows of ``partitions`` (one partition's built once: a small commit's part of its
        time; several partitions' built each time, as their sets are many)."""
        if len(partitions) > 1:
            return (checkpoints.c.name.in_(self._names), checkpoints.c.partition.in_(partitions), checkpoints.c.partitions == self.partitions)
        rows = self._rows.get(partitions[0])
        if rows is None:
            rows = self._rows[partitions[0]] = (checkpoints.c.name.in_(self._names), checkpoints.c.partition == partitions[0], checkpoints.c.partitions == self.partitions)
        return rows

    def _committer(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._commit_thread is None:
            self._commit_thread = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="projector-commit")
        return self._commit_thread


def _sort(entries: list[Entry]) -> tuple[list[Record], list[dict], dict[int, str]]:
    """The records to apply, the unreadable events' rows, and the subjects of this writer's events."""
    records, unreadable = [], []
    for entry in entries:
        if isinstance(entry.record, Record):
            records.append(entry.record)
        elif entry.record is not None:
            unreadable.append({"seq": entry.seq, "subject": entry.subject, "reason": str(entry.record)})
            log.error("unreadable event at sequence %s (%s): %s", entry.seq, entry.subject, entry.record)
    return records, unreadable, {e.seq: e.subject for e in entries}


def _forget_or_give_up(forget_all: Callable[[], None], failure: Exception) -> Callable[[], None]:
    def forget() -> None:
        try:
            forget_all()
        except RuntimeError as error:
            raise CannotIsolateError(str(error)) from failure
    return forget


def _commit_or_roll_back(transaction: RootTransaction) -> None:
    """Commit; if that fails, roll back, as ``engine.begin()`` does (a PostgreSQL connection would
    otherwise go back to the pool inside its failed transaction)."""
    try:
        transaction.commit()
    except BaseException:
        transaction.rollback()
        raise


async def _in_thread(executor: concurrent.futures.Executor, call: Callable[[], T]) -> T:
    """Run a blocking call in a worker thread. A cancelled caller still waits for the call to end, so
    that the connection it uses is never in two threads at once."""
    future = executor.submit(call)
    try:
        return await asyncio.wrap_future(future)
    except asyncio.CancelledError:
        concurrent.futures.wait([future])
        raise


def _refuse_others(batch: Sequence[Entry], owned: Mapping[int, int]) -> None:
    """Refuse a batch of several partitions holding an event of a partition the commit was not given, or
    of none: folded under another partition's checkpoint, it would be applied where no owner fenced it."""
    for entry in batch:
        if entry.partition not in owned:
            raise ValueError(
                f"event {entry.seq} ({entry.subject}) is of partition {entry.partition}, not one this commit "
                f"owns ({sorted(owned)}): build the batch's entries with their partitions (to_entries(partition_of=...))"
            )
