"""A rebuild's worker process: it folds one share of the claims, as the reading process sends it.

``services/rebuild/parallel.py`` starts the workers and feeds them; each runs ``partition_main``. The
worker's projector is the live one, reading from the pipe (``_Fed``) instead of the log, into a
place of its own with the write-behind projections. A poison event in its share makes it fold the
share again from the log, writing through, where the projector parks the claim as the live one does.
"""

from __future__ import annotations

import asyncio
import logging
import pickle
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from multiprocessing.connection import Connection as PipeEnd

from nats.js.errors import NotFoundError
from sqlalchemy import Engine

from projections.registry import build_projections
from projections.tables import CONTROL_TABLES, metadata
from services.keys import load_attribution
from services.log import ClaimLog, NatsTls, connect
from services.log.reader import time_stored
from services.log.signing import Attribution
from services.projector.errors import CannotIsolateError
from services.projector.runner import Runner, Scope
from services.projector.writer import CheckpointedWriter
from services.store.bulk_build import drop_secondary

log = logging.getLogger(__name__)
REPLAY_BATCH = 5000  # events per transaction: a rebuild wants throughput, not the live path's latency


@dataclass(frozen=True, slots=True)
class FedDelivery:
    """An event as ``distribute`` hands it to a worker: what the projector reads of a ``Delivery``."""

    seq: int
    subject: str
    data: bytes
    stored_ns: int
    restored: str | None
    headers: dict[str, str] | None = None  # its signature headers only (services/log/signing.py)

    @property
    def stored_at(self) -> datetime:
        return time_stored(self.stored_ns, self.restored)


class PipeFeed:
    """A worker's shares as ``distribute`` sends them down a pipe, in order, then ``None``."""

    def __init__(self, pipe: PipeEnd) -> None:
        self._pipe = pipe

    def receive(self) -> list[tuple] | None:
        return pickle.loads(self._pipe.recv_bytes())

    def close(self) -> None:
        self._pipe.close()  # the reading process then sends this worker nothing more


class _Fed:
    """What a worker's projector reads from: its shares as the reading process sends them."""

    def __init__(self, feed: PipeFeed, attribution: Attribution) -> None:
        self._feed = feed
        self._ended = False
        self.attribution = attribution  # read once by the process that started the rebuild

    def consumer(self, name: str, *, max_batch: int, partitions: Sequence[int] | None = None) -> _Fed:
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

    async def ack_batch(self, batch: Sequence[FedDelivery]) -> None:
        pass


def partition_main(
    nats_url: str, spec, place: tuple[str, str | None], part: int, parts: int, head: int, name: str, counter, pipe: PipeEnd | None,
    tls: NatsTls | None = None,
) -> None:
    """A worker process: fold share ``part`` of ``parts`` of the claims, through sequence ``head``, as sent on
    ``pipe``; without a pipe (a partitioned log), the partitions ``k % parts == part``, read from the log itself."""
    from services.runtime.compose import run

    feed = PipeFeed(pipe) if pipe is not None else None
    try:
        run(fold_partition(nats_url, spec, place, part, parts, head, name, counter, feed, tls))
    finally:
        if feed is not None:
            feed.close()


async def _attribution(nats_url: str, spec, part: int, tls: NatsTls | None) -> Attribution:
    """The keys and requirement the worker checks events with, read once (the rebuild ends at a head)."""
    nc = await connect(nats_url, name=f"claimlog-replay-p{part}", tls=tls)
    try:
        return await load_attribution(nc, stream=spec.name)
    finally:
        await nc.close()


async def fold_partition(
    nats_url: str, spec, place, part: int, parts: int, head: int, name: str, counter, feed: PipeFeed | None, tls: NatsTls | None = None
) -> None:
    from services.runtime.db import make_engine

    url, schema = place
    engine = make_engine(url, schema=schema, scratch=True)  # merged into the generation, then deleted
    drop_secondary(engine)  # nothing reads a worker's place but the merge (bulk_build.py)
    try:
        if feed is None:
            await _fold_own_partitions(nats_url, spec, engine, part, parts, head, name, counter, tls)
            return
        try:
            await _fold_share(_Fed(feed, await _attribution(nats_url, spec, part, tls)), engine, part, parts, head, name, counter, write_behind=True)
            return
        except CannotIsolateError as error:
            # A poison event in this share: write-behind cannot roll back what it holds, so fold the
            # share again writing through, reading the log itself, where the projector parks the
            # claim as the live one does.
            log.warning("replay worker %s: %s; folding its share again without write-behind", part, error.__cause__)
            feed.close()
            clear_place(engine)
        nc = await connect(nats_url, name=f"claimlog-replay-p{part}", tls=tls)
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
    writer = CheckpointedWriter(engine, projections, partitions=parts)
    projector = Runner(claim_log, writer, name=name, batch=REPLAY_BATCH, linger=0.1, scope=Scope(share=(part, parts), stop_at=head))

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


async def _fold_own_partitions(nats_url: str, spec, engine: Engine, part: int, parts: int, head: int, name: str, counter, tls: NatsTls | None) -> None:
    """Fold the log's partitions ``k % parts == part`` through ``head``, one after another, each with a
    consumer the server filters to it: this worker receives no other partition's events. A poison event
    makes it fold them again writing through (see ``fold_partition``)."""
    nc = await connect(nats_url, name=f"claimlog-replay-p{part}", tls=tls)
    claim_log = ClaimLog(nc, spec)
    mine = [k for k in range(claim_log.layout.partitions) if k % parts == part]
    try:
        try:
            for k in mine:
                await _fold_one_partition(claim_log, engine, k, head, name, counter, write_behind=True)
        except CannotIsolateError as error:
            log.warning("replay worker %s: %s; folding its partitions again without write-behind", part, error.__cause__)
            clear_place(engine)
            for k in mine:
                await _fold_one_partition(claim_log, engine, k, head, name, counter, write_behind=False)
        counter.value = head
    finally:
        await nc.close()


async def _fold_one_partition(claim_log: ClaimLog, engine: Engine, partition: int, head: int, name: str, counter, *, write_behind: bool) -> None:
    """Fold one partition through ``head``: until its next event after the checkpoint is past ``head`` (or
    none). Its consumer, named as the worker's own, is made again for each partition and deleted after."""
    projections = build_projections(write_behind=write_behind)
    writer = CheckpointedWriter(engine, projections, partitions=claim_log.layout.partitions)
    runner = Runner(claim_log, writer, name=name, batch=REPLAY_BATCH, linger=0.1, scope=Scope(partition=partition, stop_at=head))
    runner.load_checkpoint()
    stop = asyncio.Event()
    task = asyncio.create_task(runner.run(stop))
    subject = claim_log.layout.partition_filter(partition)
    try:
        while True:
            if task.done():
                task.result()
            counter.value = runner.checkpoint
            try:
                following = (await claim_log.nc.jetstream().get_msg(claim_log.stream, seq=runner.checkpoint + 1, subject=subject, next=True)).seq
            except NotFoundError:
                following = None
            if following is None or following > head:
                break
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        await task
        await claim_log.forget_consumer(name)
    with engine.begin() as conn:
        for projection in projections:
            if hasattr(projection, "flush"):
                projection.flush(conn)


def clear_place(engine: Engine) -> None:
    """Empty a worker's place (every read-model table and its checkpoints) to fold its share again."""
    with engine.begin() as conn:
        for table in reversed(metadata.sorted_tables):
            if table.name not in CONTROL_TABLES:
                conn.execute(table.delete())
