"""A rebuild into a scratch database, each partition through its own position: what ``claimlog verify``
compares the live read models with (``services/audit/rebuild.py``).

Unlike a generation (``replay.py``), the scratch database is the live one's dialect apart from it (a
temporary SQLite file, or a temporary PostgreSQL schema, dropped afterwards), and the fold stops exactly
at the positions the live checkpoints stood at, partition by partition, with the projector's own runner
and writer.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine, create_engine, text
from sqlalchemy.pool import NullPool

from projections.registry import build_projections
from services.log import ClaimLog, Delivery, DurableConsumer
from services.projector.runner import Runner, Scope
from services.projector.writer import CheckpointedWriter
from services.rebuild.parallel_worker import REPLAY_BATCH
from services.runtime.db import make_engine, upgrade

FOLD_TIMEOUT = 24 * 3600.0


@dataclass(frozen=True)
class Positions:
    """Where the live read models stand: each checkpoint row's partition (of ``partitions``; 1 for a
    projector of the whole log) and the sequence its projections have applied."""

    partitions: int
    at: dict[int, int]

    @property
    def head(self) -> int:
        return max(self.at.values(), default=0)


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


@contextlib.contextmanager
def scratch_database(live_engine: Engine) -> Iterator[Engine]:
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


async def fold_to_positions(claim_log: ClaimLog, engine: Engine, positions: Positions, *, progress: Callable[[int], None] | None = None) -> None:
    """Fold the log into ``engine`` (migrated here): each partition through its own position (the whole log
    through one, for ``Positions(1, ...)``), telling ``progress`` the events folded so far."""
    upgrade(engine)
    writer = CheckpointedWriter(engine, build_projections(), partitions=positions.partitions)
    replayed = _Replayed()
    for partition, through in sorted(positions.at.items()):
        name = f"verify-{uuid.uuid4().hex[:12]}"
        scope = Scope(partition=partition) if positions.partitions > 1 else Scope()
        projector = Runner(_LogUpTo(claim_log, through, replayed), writer, name=name, batch=REPLAY_BATCH, linger=0.1, scope=scope)
        projector.load_checkpoint()
        try:
            if through > 0:
                async with _reporting(replayed, progress):
                    await projector.run_until(through, timeout=FOLD_TIMEOUT)
        finally:
            await claim_log.forget_consumer(name)


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
