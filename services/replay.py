"""Rebuilding the read models from the first event into a new generation, then switching to it.

``rebuild_generation`` is the one way a rebuild happens: ``claimlog replay``, and the projector when
it finds tables built by another version of a projection, both call it. The live site keeps
serving the active generation meanwhile; the switch is one transaction in the home database.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import multiprocessing
import os
import pickle
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from multiprocessing.connection import Connection as PipeEnd

from sqlalchemy import Connection, Engine, select

from projections.checksum import table_checksums
from projections.registry import build_projections
from projections.tables import CONTROL_TABLES, checkpoints, claim_pages, metadata
from services.bulk_build import drop_secondary, restore_secondary
from services.generations import Generations
from services.log import ClaimLog, Delivery, connect
from services.log.reader import time_stored
from services.projector.runner import CannotIsolateError, Projector, claim_partition
from services.runtime import nats_server, ready, stream_spec
from services.settings import Settings

log = logging.getLogger(__name__)
REPLAY_BATCH = 5000  # events per transaction: a rebuild wants throughput, not the live path's latency
Progress = Callable[[int, int], None]  # (applied through, head of the log)
PARALLEL_FROM = 100_000  # below this, starting worker processes costs more than it saves
MAX_WORKERS = 4


def default_workers() -> int:
    return max(1, min(MAX_WORKERS, os.cpu_count() or 1))


@dataclass
class Diff:
    """How a new generation differs from the active one, claim by claim and table by table."""

    old_seq: int
    new_seq: int
    tables_differing: list[str] = field(default_factory=list)
    claims_changed: list[tuple[str, list[str]]] = field(default_factory=list)  # claim, top-level page fields
    claims_only_new: list[str] = field(default_factory=list)
    claims_only_old: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.tables_differing or self.claims_changed or self.claims_only_new or self.claims_only_old)


@dataclass
class Rebuilt:
    """What a rebuild did."""

    generation: int
    replaced: int | None  # the generation it replaced, when it switched
    applied_through: int
    diff: Diff | None


def stale_projections(engine: Engine) -> dict[str, tuple[int, int]]:
    """Projections whose tables were built by another version of their code: name -> (built, declared)."""
    with engine.connect() as conn:
        built = dict(conn.execute(select(checkpoints.c.name, checkpoints.c.version)).all())
    return {
        p.name: (built[p.name], p.version) for p in build_projections() if p.name in built and built[p.name] != p.version
    }


async def rebuild_if_stale(settings: Settings, generations: Generations) -> Rebuilt | None:
    """At a projector's start: when the active tables were built by another version of a projection's
    code, build a new generation from the log (the API serves the old one meanwhile) and switch to it."""
    stale = stale_projections(generations.active()[1])
    if not stale:
        return None
    changes = ", ".join(f"{name} {built} -> {now}" for name, (built, now) in stale.items())
    log.warning("projection versions changed (%s): rebuilding the read models from the log", changes)
    rebuilt = await rebuild_generation(settings, generations)
    log.warning("rebuilt generation %s through sequence %s and switched to it", rebuilt.generation, rebuilt.applied_through)
    return rebuilt


async def rebuild_generation(
    settings: Settings,
    generations: Generations,
    *,
    switch: bool = True,
    diff: bool = False,
    progress: Progress | None = None,
    workers: int | None = None,
    parallel_from: int = PARALLEL_FROM,
) -> Rebuilt:
    """Build a new generation from the first event until it has caught up with the log; then switch to it.

    A log of ``parallel_from`` events or more is first folded by ``workers`` processes (default: one
    per core, at most four), each applying the events of its share of the claims into a place of its
    own; their rows are then merged inside the database, and one projector catches up from there.
    """
    number, engine = generations.create()
    try:
        async with nats_server(settings, role="projector") as url:
            nc = await connect(url, name="claimlog-replay")
            try:
                claim_log = ClaimLog(nc, stream_spec(settings))
                await ready(claim_log)
                name = f"{settings.projector_name}-replay-g{number}"
                head = await claim_log.head()
                parts = workers if workers is not None else default_workers()
                if parts > 1 and head >= parallel_from:
                    await _build_in_parallel(claim_log, url, settings, generations, number, head, parts, name, progress)
                projector = Projector(claim_log, engine, build_projections(), name=name, batch=REPLAY_BATCH, linger=0.1)
                try:
                    applied = await _catch_up(projector, claim_log, progress)
                finally:
                    await claim_log.forget_consumer(name)
            finally:
                await nc.close()
    except BaseException:
        generations.abandon(number)
        raise
    report = compare(generations.engine(generations.active_number()), engine) if diff else None
    replaced = generations.switch(number) if switch else None
    log.info("generation %s rebuilt through sequence %s%s", number, applied, " and switched to" if switch else "")
    return Rebuilt(number, replaced, applied, report)


async def _build_in_parallel(
    claim_log: ClaimLog,
    nats_url: str,
    settings: Settings,
    generations: Generations,
    number: int,
    head: int,
    parts: int,
    name: str,
    progress: Progress | None,
) -> None:
    """Fold the log through ``head`` with ``parts`` processes, one share of the claims each, then merge.

    A claim's page and its contributors' rows depend on that claim's events alone, so shares of the
    claims fold independently. This process reads the log once and hands each worker its share
    (``_distribute``); each worker folds into a place of its own, so that no two processes contend
    for one SQLite file: the first worker into the generation itself, the others into places merged
    into it afterwards.
    """
    # The first share is folded straight into the generation (nothing reads it yet), so only the
    # others are merged: on a log of a million events the merge copied 600 MB of pages.
    generations.engine(number).dispose()  # the first worker's scratch engine must be the file's only one
    places = [generations.place(number)] + [generations.partition(number, part) for part in range(1, parts)]
    context = multiprocessing.get_context("spawn")
    counters = [context.Value("q", 0) for _ in range(parts)]
    pipes = [context.Pipe(duplex=False) for _ in range(parts)]  # (receiving end, sending end)
    spec = stream_spec(settings)
    workers = [
        context.Process(
            target=_partition_main,
            args=(nats_url, spec, place, part, parts, head, f"{name}-p{part}", counters[part], pipes[part][0]),
            name=f"claimlog-replay-p{part}",
            daemon=True,
        )
        for part, place in enumerate(places)
    ]
    started = time.monotonic()
    for worker in workers:
        worker.start()
    for receiving, _ in pipes:
        receiving.close()  # the worker's copy is the only one left: its exit breaks the pipe
    distributing = asyncio.create_task(_distribute(claim_log, f"{name}-reader", head, [sending for _, sending in pipes]))
    try:
        while not distributing.done() or any(worker.is_alive() for worker in workers):
            if distributing.done():
                distributing.result()  # a failed read ends the rebuild at once
            if any(worker.exitcode not in (None, 0) for worker in workers):
                break  # so does a failed worker
            if progress:
                progress(min(counter.value for counter in counters), head)
            await asyncio.sleep(0.2)
        distributing.result()
    finally:
        distributing.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await distributing
        for worker in workers:
            if worker.is_alive():
                worker.terminate()
            worker.join()
        for _, sending in pipes:
            sending.close()
    failed = [w.name for w in workers if w.exitcode != 0]
    if failed:
        raise RuntimeError(f"replay worker(s) {', '.join(failed)} failed (exit codes {[w.exitcode for w in workers]})")
    folded = time.monotonic()
    with generations.building(number) as target:
        drop_secondary(target)  # the merge copies rows in bare; each index is then built once (bulk_build.py)
        generations.merge_partitions(number, places[1:], target)
        merged = time.monotonic()
        restore_secondary(target)
    log.info(
        "generation %s: %s workers folded %s events in %.1fs, merged in %.1fs, indexed in %.1fs",
        number, parts, head, folded - started, merged - folded, time.monotonic() - merged,
    )
    with generations.engine(number).begin() as conn:
        conn.execute(checkpoints.delete())
        conn.execute(checkpoints.insert(), [{"name": p.name, "version": p.version, "last_seq": head} for p in build_projections()])


async def _distribute(claim_log: ClaimLog, name: str, head: int, sending: list[PipeEnd]) -> None:
    """Read the log through ``head`` once and send each worker its share of every batch, then ``None``.

    Each worker reading the whole log itself and skipping the others' events cost it a quarter of
    its CPU time, and the server sent every event once per worker. A worker that has stopped taking
    its shares (it folds its share again from the log after a poison event) is sent nothing more. A
    share ends with the batch's last event even when that is another share's (sent without its
    data): the worker skips it, and its checkpoint moves on.
    """
    parts = len(sending)
    open_ = list(sending)
    consumer = claim_log.consumer(name, max_batch=REPLAY_BATCH)
    await consumer.start(0)
    try:
        through = 0
        while through < head:
            batch = await consumer.next_batch(timeout=0.25, linger=0.1)
            if not batch:
                continue
            within = [d for d in batch if d.seq <= head]
            if within:
                shares = _split(within, parts)
                await asyncio.gather(*(_send(open_, part, share) for part, share in enumerate(shares)))
            through = min(batch[-1].seq, head)
            await consumer.ack_through(batch[-1])
        await asyncio.gather(*(_send(open_, part, None) for part in range(parts)))
    finally:
        await consumer.stop()
        await claim_log.forget_consumer(name)


def _split(batch: list[Delivery], parts: int) -> list[list[tuple]]:
    """A batch's events by share of the claims, as ``FedDelivery`` fields for a worker."""
    shares: list[list[tuple]] = [[] for _ in range(parts)]
    for delivery in batch:
        shares[claim_partition(delivery.subject, parts)].append((delivery.seq, delivery.subject, delivery.data, *delivery.stamp()))
    last = batch[-1]
    for share in shares:
        if not share or share[-1][0] != last.seq:
            share.append((last.seq, last.subject, b"", *last.stamp()))
    return shares


async def _send(open_: list[PipeEnd | None], part: int, share: list[tuple] | None) -> None:
    connection = open_[part]
    if connection is None:
        return
    try:
        await asyncio.to_thread(connection.send_bytes, pickle.dumps(share, pickle.HIGHEST_PROTOCOL))
    except (BrokenPipeError, ConnectionResetError):
        open_[part] = None  # the worker reads the log itself now, or failed (its exit code says which)


@dataclass(frozen=True, slots=True)
class FedDelivery:
    """An event as ``_distribute`` hands it to a worker: what the projector reads of a ``Delivery``."""

    seq: int
    subject: str
    data: bytes
    stored_ns: int
    restored: str | None

    @property
    def stored_at(self) -> datetime:
        return time_stored(self.stored_ns, self.restored)


class _PipeFeed:
    """A worker's shares as ``_distribute`` sends them down a pipe, in order, then ``None``."""

    def __init__(self, pipe: PipeEnd) -> None:
        self._pipe = pipe

    def receive(self) -> list[tuple] | None:
        return pickle.loads(self._pipe.recv_bytes())

    def close(self) -> None:
        self._pipe.close()  # the reading process then sends this worker nothing more


class _Fed:
    """What a worker's projector reads from: its shares as the reading process sends them."""

    def __init__(self, feed: _PipeFeed) -> None:
        self._feed = feed
        self._ended = False

    def consumer(self, name: str, *, max_batch: int) -> _Fed:
        return self

    async def start(self, after_seq: int) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def next_batch(self, **_options) -> list[FedDelivery]:
        if self._ended:
            await asyncio.sleep(0.01)  # the projector stops as soon as it sees the checkpoint at the head
            return []
        share = await asyncio.to_thread(self._feed.receive)
        if share is None:
            self._ended = True
            return []
        return [FedDelivery(*event) for event in share]

    async def ack_through(self, delivery: FedDelivery) -> None:
        pass


def _partition_main(nats_url: str, spec, place: tuple[str, str | None], part: int, parts: int, head: int, name: str, counter, pipe: PipeEnd) -> None:
    """A worker process: fold share ``part`` of ``parts`` of the claims, through sequence ``head``, as sent on ``pipe``."""
    from services.runtime import run

    feed = _PipeFeed(pipe)
    try:
        run(_fold_partition(nats_url, spec, place, part, parts, head, name, counter, feed))
    finally:
        feed.close()


async def _fold_partition(nats_url: str, spec, place, part: int, parts: int, head: int, name: str, counter, feed: _PipeFeed) -> None:
    from services.db import make_engine

    url, schema = place
    engine = make_engine(url, schema=schema, scratch=True)  # merged into the generation, then deleted
    drop_secondary(engine)  # nothing reads a worker's place but the merge (bulk_build.py)
    try:
        try:
            await _fold_share(_Fed(feed), engine, part, parts, head, name, counter, write_behind=True)
            return
        except CannotIsolateError as error:
            # A poison event in this share: write-behind cannot roll back what it holds, so fold the
            # share again writing through, reading the log itself, where the projector parks the
            # claim as the live one does.
            log.warning("replay worker %s: %s; folding its share again without write-behind", part, error.__cause__)
            feed.close()
            _clear(engine)
        nc = await connect(nats_url, name=f"claimlog-replay-p{part}")
        claim_log = ClaimLog(nc, spec)
        try:
            await _fold_share(claim_log, engine, part, parts, head, name, counter, write_behind=False)
        finally:
            await claim_log.forget_consumer(name)
            await nc.close()
    finally:
        engine.dispose()


async def _fold_share(claim_log, engine: Engine, part: int, parts: int, head: int, name: str, counter, *, write_behind: bool) -> None:
    projections = build_projections(write_behind=write_behind)
    projector = Projector(
        claim_log, engine, projections, name=name, batch=REPLAY_BATCH, linger=0.1, partition=(part, parts), stop_at=head
    )

    async def report() -> None:
        while True:
            counter.value = projector.checkpoint
            await asyncio.sleep(0.2)

    reporter = asyncio.create_task(report())
    try:
        projector.load_checkpoint()
        await projector.run_until(head, timeout=None)
        with engine.begin() as conn:
            for projection in projections:
                if hasattr(projection, "flush"):
                    projection.flush(conn)
        counter.value = projector.checkpoint
    finally:
        reporter.cancel()


def _clear(engine: Engine) -> None:
    """Empty a worker's place (every read-model table and its checkpoints) to fold its share again."""
    with engine.begin() as conn:
        for table in reversed(metadata.sorted_tables):
            if table.name not in CONTROL_TABLES:
                conn.execute(table.delete())


async def _catch_up(projector: Projector, claim_log: ClaimLog, progress: Progress | None) -> int:
    """Apply the log until the projector has reached the head as it stands after the last batch."""
    projector.load_checkpoint()
    head = await claim_log.head()
    while True:
        watcher = asyncio.create_task(_report(projector, head, progress)) if progress else None
        try:
            await projector.run_until(head, timeout=None)
        finally:
            if watcher is not None:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
        if progress:
            progress(projector.checkpoint, head)
        newer = await claim_log.head()
        if newer <= projector.checkpoint:
            return projector.checkpoint
        head = newer


async def _report(projector: Projector, head: int, progress: Progress) -> None:
    while True:
        progress(projector.checkpoint, head)
        await asyncio.sleep(0.2)


def compare(old: Engine, new: Engine, *, limit: int = 50) -> Diff:
    """Table checksums and, for claim pages, which claims' pages differ and in which fields.

    The two generations may stand at different sequences (the live one keeps moving): a claim whose
    page differs only because the live one has seen newer events is not reported.
    """
    with old.connect() as a, new.connect() as b:
        old_seq, new_seq = _position(a), _position(b)
        old_sums, new_sums = table_checksums(a), table_checksums(b)
        report = Diff(old_seq, new_seq, tables_differing=[t for t in new_sums if old_sums.get(t) != new_sums[t]])
        if "claim_pages" in report.tables_differing:
            _page_differences(a, b, min(old_seq, new_seq), report, limit)
    return report


def _position(conn: Connection) -> int:
    return min(conn.execute(select(checkpoints.c.last_seq)).scalars(), default=0)


def _page_differences(old: Connection, new: Connection, upto: int, report: Diff, limit: int) -> None:
    query = select(claim_pages.c.claim_id, claim_pages.c.last_seq, claim_pages.c.doc).order_by(claim_pages.c.claim_id)
    old_rows = {row.claim_id: row for row in old.execute(query)}
    for row in new.execute(query):
        before = old_rows.pop(row.claim_id, None)
        if before is None:
            if row.last_seq <= upto and len(report.claims_only_new) < limit:
                report.claims_only_new.append(row.claim_id)
            continue
        if before.last_seq != row.last_seq or before.doc == row.doc:
            continue  # one of them has seen newer events, or they agree
        a, b = json.loads(before.doc), json.loads(row.doc)
        fields = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
        if len(report.claims_changed) < limit:
            report.claims_changed.append((row.claim_id, fields))
    report.claims_only_old = [claim for claim, row in old_rows.items() if row.last_seq <= upto][:limit]
