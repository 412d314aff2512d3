"""The read models against a fresh replay: live table checksums vs a scratch database rebuilt from the log.

``rebuild_checksums`` is the one place the scratch rebuild happens, so a faster replay path can
replace its body without touching the comparison.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Connection, Engine, create_engine, select, text
from sqlalchemy.pool import NullPool

from projections.checksum import table_checksums
from projections.registry import build_projections
from projections.repeats import REPEAT_REASON_PREFIX
from projections.tables import checkpoints, unreadable_events
from services.audit.verify import Finding, Report
from services.log import ClaimLog, Delivery, DurableConsumer
from services.projector.runner import Runner, Scope
from services.projector.writer import CheckpointedWriter
from services.runtime.db import make_engine, upgrade

ATTEMPTS = 5
RETRY_PAUSE = 0.2  # seconds between reads of a moving projector's tables
REBUILD_BATCH = 5000
REBUILD_TIMEOUT = 24 * 3600.0


@dataclass
class _Replayed:
    """Events handed to the replay so far, over all its partitions (what its progress bar counts)."""

    events: int = 0


class _ConsumerUpTo(DurableConsumer):
    """A consumer that hands over nothing after ``until_seq``, so the rebuild stops exactly there; it
    counts each event it hands over once (a redelivery is at or below the highest sequence handed over)."""

    def __init__(self, *args, until_seq: int, replayed: _Replayed, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._until, self._replayed, self._highest = until_seq, replayed, 0

    async def next_batch(self, **options) -> list[Delivery]:
        handed = [d for d in await super().next_batch(**options) if d.seq <= self._until]
        self._replayed.events += sum(d.seq > self._highest for d in handed)
        self._highest = max([self._highest, *(d.seq for d in handed)])
        return handed


class _LogUpTo(ClaimLog):
    def __init__(self, claim_log: ClaimLog, until_seq: int, replayed: _Replayed) -> None:
        super().__init__(claim_log.nc, claim_log.spec)
        self._until, self._replayed = until_seq, replayed

    def consumer(self, name: str, *, max_batch: int, partitions: Sequence[int] | None = None) -> DurableConsumer:
        return _ConsumerUpTo(
            self.nc, self.stream, name, max_batch=max_batch, layout=self.layout, partitions=partitions,
            until_seq=self._until, replayed=self._replayed,
        )


@dataclass(frozen=True)
class Positions:
    """Where the live read models stand: each checkpoint row's partition (of ``partitions``; 1 for a
    projector of the whole log) and the sequence its projections have applied."""

    partitions: int
    at: dict[int, int]

    @property
    def head(self) -> int:
        return max(self.at.values(), default=0)


def live_checksums(engine: Engine) -> tuple[Positions | None, dict[str, str]]:
    """The live positions and the table checksums at them (None when nothing was ever projected).

    The projector may be running: the positions are read before and after the checksums, and a read
    during which they moved is done again (a commit always moves its partition's, with the rows, in
    one transaction). The partitions of a partitioned log stand each at its own sequence.
    """
    positions: Positions | str | None = None
    for _ in range(ATTEMPTS):
        with engine.connect() as conn:
            positions = _positions(conn)
            sums = table_checksums(conn)
        with engine.connect() as conn:
            if not isinstance(positions, str) and _positions(conn) == positions:
                return positions, sums
        time.sleep(RETRY_PAUSE)
    if isinstance(positions, str):
        raise RuntimeError(f"{positions} in each of {ATTEMPTS} reads: let the projector catch up with the log, or rebuild them with replay")
    raise RuntimeError(f"the projector moved during each of {ATTEMPTS} reads of the read models: stop it, or retry")


def _positions(conn) -> Positions | str | None:
    """The checkpoints as ``Positions``, or why they are not one consistent point."""
    rows = conn.execute(select(checkpoints.c.share, checkpoints.c.shares, checkpoints.c.last_seq)).all()
    if not rows:
        return None
    counts = {shares for _, shares, _ in rows}
    at: dict[int, set[int]] = {}
    for share, _, seq in rows:
        at.setdefault(share, set()).add(seq)
    partitions = counts.pop() if len(counts) == 1 else 0
    if partitions < 1 or any(len(seqs) > 1 for seqs in at.values()) or (partitions == 1 and len(at) > 1):
        standing = sorted({seq for _, _, seq in rows})
        return f"the projections stood at different sequences {standing}"
    return Positions(partitions, {share: seqs.pop() for share, seqs in at.items()})


async def compare_read_models(
    claim_log: ClaimLog, live_engine: Engine, report: Report, *, progress: Callable[[int], None] | None = None
) -> None:
    """Add a finding for every read-model table whose rows differ from a fresh replay to the live positions."""
    try:
        positions, live = live_checksums(live_engine)
    except RuntimeError as error:
        report.add(Finding("read_models", str(error)))
        return
    if positions is None:
        report.tables_note = "the read models were never projected: nothing to compare"
        return
    if positions.partitions != claim_log.layout.partitions:
        # Shares of a projector of the whole log (not the log's partitions): one point, or none yet.
        standing = sorted(set(positions.at.values()))
        if len(standing) > 1:
            report.add(Finding("read_models", f"the projector's shares stood at different sequences {standing}: let them catch up"))
            return
        positions = Positions(1, {0: standing[0]})
    at_seq = positions.head
    fresh, repeats = await rebuild_checksums(claim_log, live_engine, positions, progress=progress)
    report.tables_at_seq = at_seq
    for seq, subject, reason in repeats:
        report.add(Finding("repeat", reason, seq, subject, _claim_of(claim_log, subject)))
    for table in sorted(live.keys() | fresh.keys()):
        if live.get(table) != fresh.get(table):
            report.add(
                Finding("table", f"{table} differs from a fresh replay of the log to sequence {at_seq}", at_seq, table=table)
            )


async def rebuild_checksums(
    claim_log: ClaimLog, live_engine: Engine, until: int | Positions, *, progress: Callable[[int], None] | None = None
) -> tuple[dict[str, str], list[tuple[int, str, str]]]:
    """Table checksums of read models replayed from the log into a scratch database: through ``until``,
    or each partition through its own position; and the repeats the replay folded no projection with
    (sequence, subject, reason: projections/repeats.py), read from its tables rather than kept in memory."""
    positions = until if isinstance(until, Positions) else Positions(1, {0: until})
    with _scratch_engine(live_engine) as scratch:
        upgrade(scratch)
        writer = CheckpointedWriter(scratch, build_projections(), partitions=positions.partitions)
        replayed = _Replayed()
        for partition, through in sorted(positions.at.items()):
            name = f"verify-{uuid.uuid4().hex[:12]}"
            scope = Scope(partition=partition) if positions.partitions > 1 else Scope()
            projector = Runner(_LogUpTo(claim_log, through, replayed), writer, name=name, batch=REBUILD_BATCH, linger=0.1, scope=scope)
            projector.load_checkpoint()
            try:
                if through > 0:
                    async with _reporting(replayed, progress):
                        await projector.run_until(through, timeout=REBUILD_TIMEOUT)
            finally:
                await claim_log.forget_consumer(name)
        with scratch.connect() as conn:
            return table_checksums(conn), _repeats(conn)


def _repeats(conn: Connection) -> list[tuple[int, str, str]]:
    """The repeats among the unreadable events, in log order (at most as many as a report keeps)."""
    query = (
        select(unreadable_events.c.seq, unreadable_events.c.subject, unreadable_events.c.reason)
        .where(unreadable_events.c.reason.startswith(REPEAT_REASON_PREFIX, autoescape=True))
        .order_by(unreadable_events.c.seq)
    )
    return [tuple(row) for row in conn.execute(query)]


def _claim_of(claim_log: ClaimLog, subject: str) -> str | None:
    try:
        return claim_log.layout.claim_of(subject)
    except ValueError:
        return None


@contextlib.contextmanager
def _scratch_engine(live_engine: Engine) -> Iterator[Engine]:
    """An empty database of the live one's dialect: a temporary SQLite file, or a temporary PostgreSQL schema."""
    if live_engine.dialect.name == "sqlite":
        with tempfile.TemporaryDirectory(prefix="claimlog-verify-") as folder:
            engine = make_engine(f"sqlite:///{Path(folder) / 'replay.sqlite3'}")
            try:
                yield engine
            finally:
                engine.dispose()
        return
    schema = f"claimlog_verify_{uuid.uuid4().hex[:12]}"
    with live_engine.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    engine = create_engine(live_engine.url, connect_args={"options": f"-csearch_path={schema}"}, poolclass=NullPool)
    try:
        yield engine
    finally:
        engine.dispose()
        with live_engine.begin() as conn:
            conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))


@contextlib.asynccontextmanager
async def _reporting(replayed: _Replayed, progress: Callable[[int], None] | None) -> AsyncIterator[None]:
    """Report the events replayed every 0.2 s while a partition's replay runs, and once when it ends
    (a replay shorter than that would otherwise end its bar where it started)."""
    task = asyncio.create_task(_report(replayed, progress)) if progress else None
    try:
        yield
    finally:
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            progress(replayed.events)


async def _report(replayed: _Replayed, progress: Callable[[int], None]) -> None:
    while True:
        progress(replayed.events)
        await asyncio.sleep(0.2)
