"""Rebuilding the read models from the first event into a new generation, then switching to it.

``rebuild_generation`` is the one way a rebuild happens: ``claimlog replay``, and the projector when
it finds tables built by another version of a projection, both call it. The live site keeps
serving the active generation meanwhile; the switch is one transaction in the home database.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass

import nats.errors
from sqlalchemy import Engine, select

from projections.registry import build_projections
from projections.tables import checkpoints
from services.log import ClaimLog, connect
from services.projector.runner import Runner, Scope
from services.projector.writer import CheckpointedWriter
from services.rebuild.diff import Diff, diff_generations
from services.rebuild.parallel import Progress, build_in_parallel, worker_consumer
from services.rebuild.parallel_worker import REPLAY_BATCH
from services.rebuild.some import PartialRebuildDisagrees, chosen_projections, copy_others, parked_in
from services.runtime.from_settings import nats_server, nats_tls, ready, stream_spec
from services.runtime.settings import Settings
from services.store.generations import Generations

log = logging.getLogger(__name__)
PARALLEL_FROM = 100_000  # below this, starting worker processes costs more than it saves
MAX_WORKERS = 4


def default_workers() -> int:
    return max(1, min(MAX_WORKERS, os.cpu_count() or 1))


@dataclass
class Rebuilt:
    """What a rebuild did."""

    generation: int
    replaced: int | None  # the generation it replaced, when it switched
    applied_through: int
    diff: Diff | None
    folded: tuple[str, ...] = ()  # the projections folded from the first event (the others' tables were copied)


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
    log.warning("projection versions changed (%s): rebuilding them from the log", changes)
    rebuilt = await rebuild_generation(settings, generations, projections=sorted(stale))
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
    projections: Sequence[str] | None = None,
) -> Rebuilt:
    """Build a new generation from the first event until it has caught up with the log; then switch to it.

    A partitioned log of ``parallel_from`` events or more is first folded by ``workers`` processes
    (default: one per core, at most four, and no more than the log's partitions), each applying the
    events of its partitions into a place of its own; their rows are then merged inside the database, and one projector catches up from there.
    With ``projections``, only those are folded from the first event, and the others' tables are
    copied from the active generation (services/rebuild/some.py).
    """
    chosen = chosen_projections(projections) if projections is not None else build_projections()
    partial = len(chosen) < len(build_projections())
    number, engine = generations.create()
    try:
        applied, report = await _build(settings, generations, number, chosen if partial else None, progress, workers, parallel_from, diff=diff)
    except PartialRebuildDisagrees as why:
        generations.abandon(number)
        log.warning("%s: rebuilding every projection instead", why)
        return await rebuild_generation(settings, generations, switch=switch, diff=diff, progress=progress, workers=workers, parallel_from=parallel_from)
    except BaseException:
        generations.abandon(number)
        raise
    replaced = generations.switch(number) if switch else None
    log.info("generation %s rebuilt through sequence %s%s", number, applied, " and switched to" if switch else "")
    return Rebuilt(number, replaced, applied, report, tuple(p.name for p in chosen))


async def _build(
    settings: Settings, generations: Generations, number: int, chosen: list | None, progress: Progress | None,
    workers: int | None, parallel_from: int, *, diff: bool = False,
) -> tuple[int, Diff | None]:
    """Fold the log into generation ``number``: the ``chosen`` projections alone first (the others copied),
    or every projection by several processes when the log is large; then catch up with the head.
    Returns the sequence applied through and, with ``diff``, how the generation differs from the active one."""
    async with nats_server(settings, role="projector") as url:
        nc = await connect(url, name="claimlog-replay", tls=nats_tls(settings))
        claim_log = ClaimLog(nc, stream_spec(settings))
        name = f"{settings.projector_name}-replay-g{number}"
        parts = min(workers if workers is not None else default_workers(), claim_log.layout.partitions)
        try:
            await ready(claim_log)
            head = await claim_log.head()
            if chosen is not None:
                await _fold_chosen(claim_log, generations, number, chosen, f"{name}-chosen", progress)
            elif parts > 1 and head >= parallel_from:
                await build_in_parallel(url, settings, generations, number, head, parts, name, progress)
            writer = CheckpointedWriter(generations.engine(number), build_projections())
            projector = Runner(claim_log, writer, name=name, batch=REPLAY_BATCH, linger=0.1)
            applied = await _catch_up(projector, claim_log, progress)
            if not diff:
                return applied, None
            return applied, await diff_generations(claim_log, generations.engine(generations.active_number()), generations.engine(number))
        finally:
            workers_own = [worker_consumer(name, part) for part in range(parts)]
            await _forget_consumers(claim_log, [name, f"{name}-chosen", *workers_own])
            await nc.close()


async def _forget_consumers(claim_log: ClaimLog, names: list[str]) -> None:
    """Delete every consumer a rebuild may have made, its workers' too (one killed before it deleted its own)."""
    for name in names:
        try:
            await claim_log.forget_consumer(name)
        except (nats.errors.Error, TimeoutError) as error:
            log.warning("could not delete the rebuild's consumer %s (%s): the server drops it once idle", name, error)


async def _fold_chosen(
    claim_log: ClaimLog, generations: Generations, number: int, chosen: list, name: str, progress: Progress | None
) -> None:
    """Copy the other projections' tables from the active generation, then fold the chosen ones up to
    where the copies stand, so that all stand at one position for the catch-up."""
    # In a thread: a large copy must not hold up this process's connections (or, in tests, a live projector).
    position, parked = await asyncio.to_thread(copy_others, generations, number, {p.name for p in chosen})
    writer = CheckpointedWriter(generations.engine(number), chosen)
    projector = Runner(claim_log, writer, name=name, batch=REPLAY_BATCH, linger=0.1, scope=Scope(stop_at=position))
    try:
        projector.load_checkpoint()
        await _run_to(projector, position, progress)
    finally:
        await claim_log.forget_consumer(name)
    ours = parked_in(generations.engine(number))
    if ours != parked:
        raise PartialRebuildDisagrees(
            f"{', '.join(p.name for p in chosen)} alone park {len(ours)} events where the active tables park {len(parked)}"
        )


async def _catch_up(projector: Runner, claim_log: ClaimLog, progress: Progress | None) -> int:
    """Apply the log until the projector has reached the head as it stands after the last batch."""
    projector.load_checkpoint()
    head = await claim_log.head()
    while True:
        await _run_to(projector, head, progress)
        newer = await claim_log.head()
        if newer <= projector.checkpoint:
            return projector.checkpoint
        head = newer


async def _run_to(projector: Runner, seq: int, progress: Progress | None) -> None:
    """Run ``projector`` until its checkpoint reaches ``seq``, telling ``progress`` as it goes."""
    watcher = asyncio.create_task(_report(projector, seq, progress)) if progress else None
    try:
        await projector.run_until(seq, timeout=None)
    finally:
        if watcher is not None:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
    if progress:
        progress(projector.checkpoint, seq)


async def _report(projector: Runner, head: int, progress: Progress) -> None:
    while True:
        progress(projector.checkpoint, head)
        await asyncio.sleep(0.2)
