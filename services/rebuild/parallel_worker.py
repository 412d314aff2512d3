"""A rebuild's worker process: it folds some partitions of the log, each read from the log itself.

``services/rebuild/parallel.py`` starts the workers; each runs ``partition_main``. The worker's runner
is the projector's own, reading one partition at a time with a consumer the server filters to it, into
a place of its own with the write-behind projections. A poison event in its partitions makes it fold
them again writing through, where the projector parks the claim as the live one does.
"""

from __future__ import annotations

import asyncio
import logging

from nats.js.errors import NotFoundError
from sqlalchemy import Engine

from projections.registry import build_projections
from projections.tables import CONTROL_TABLES, metadata
from services.log import ClaimLog, NatsTls, connect
from services.projector.errors import CannotIsolateError
from services.projector.runner import Runner, Scope
from services.projector.writer import CheckpointedWriter
from services.store.bulk_build import drop_secondary

log = logging.getLogger(__name__)
REPLAY_BATCH = 5000  # events per transaction: a rebuild wants throughput, not the live path's latency


def partition_main(nats_url: str, spec, place: tuple[str, str | None], part: int, parts: int, head: int, name: str, counter, tls: NatsTls | None = None) -> None:
    """A worker process: fold the log's partitions ``k % parts == part`` through sequence ``head``."""
    from services.runtime.from_settings import run

    run(fold_partition(nats_url, spec, place, part, parts, head, name, counter, tls))


async def fold_partition(nats_url: str, spec, place, part: int, parts: int, head: int, name: str, counter, tls: NatsTls | None = None) -> None:
    """Fold worker ``part`` of ``parts``'s partitions through ``head`` into ``place`` (a url and schema)."""
    from services.runtime.db import make_engine

    url, schema = place
    engine = make_engine(url, schema=schema, scratch=True)  # merged into the generation, then deleted
    drop_secondary(engine)  # nothing reads a worker's place but the merge (bulk_build.py)
    try:
        await _fold_own_partitions(nats_url, spec, engine, part, parts, head, name, counter, tls)
    finally:
        engine.dispose()


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
    """Empty a worker's place (every read-model table and its checkpoints) to fold its partitions again."""
    with engine.begin() as conn:
        for table in reversed(metadata.sorted_tables):
            if table.name not in CONTROL_TABLES:
                conn.execute(table.delete())
