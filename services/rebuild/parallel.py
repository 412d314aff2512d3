"""The parallel first pass of a rebuild: worker processes fold the log's partitions, each its own.

A claim's page and its contributors' rows depend on that claim's events alone, and a claim's events
are all in one partition of the log, so partitions fold independently. Each worker process reads its
own partitions (``k % parts``) from the log, filtered by the server, so no process receives the whole
log; each folds into a place of its own, so that no two processes contend for one SQLite file; the
places are then merged into the generation. A log stored before partitions is one partition: it is
folded by one process. ``services/rebuild/replay.py`` decides when this pays and catches up from
where it ends.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import time
from collections.abc import Callable

from projections.registry import build_projections
from projections.tables import checkpoints
from services.log import NatsTls
from services.rebuild.parallel_worker import partition_main
from services.runtime.from_settings import nats_tls, stream_spec
from services.runtime.settings import Settings
from services.store.bulk_build import drop_secondary, restore_secondary
from services.store.generations import Generations

log = logging.getLogger(__name__)
Progress = Callable[[int, int], None]  # (applied through, head of the log)


async def build_in_parallel(
    nats_url: str,
    settings: Settings,
    generations: Generations,
    number: int,
    head: int,
    parts: int,
    name: str,
    progress: Progress | None,
) -> None:
    """Fold the log through ``head`` with ``parts`` processes, some of its partitions each, then merge.

    The first worker folds into the generation itself, the others into places merged into it
    afterwards; the generation's checkpoints then stand at ``head``.
    """
    # The first worker folds straight into the generation (nothing reads it yet), so only the others'
    # places are merged: the merge copies every page of the other workers, hundreds of MB on a large log.
    generations.engine(number).dispose()  # the first worker's scratch engine must be the file's only one
    places = [generations.place(number)] + [generations.partition(number, part) for part in range(1, parts)]
    started = time.monotonic()
    await _fold(nats_url, stream_spec(settings), places, head, name, progress, nats_tls(settings))
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


async def _fold(nats_url: str, spec, places: list, head: int, name: str, progress: Progress | None, tls: NatsTls | None = None) -> None:
    """Start a worker process per place, each folding its partitions of the log through ``head``, and
    wait for them all.

    A failed worker ends the fold at once: the other workers are stopped, and the error names the
    worker that failed on its own.
    """
    parts = len(places)
    context = multiprocessing.get_context("spawn")
    counters = [context.Value("q", 0) for _ in range(parts)]
    workers = [
        context.Process(
            target=partition_main,
            args=(nats_url, spec, place, part, parts, head, worker_consumer(name, part), counters[part], tls),
            name=f"claimlog-replay-p{part}",
            daemon=True,
        )
        for part, place in enumerate(places)
    ]
    for worker in workers:
        worker.start()

    def report() -> None:
        if progress:
            progress(min(counter.value for counter in counters), head)

    try:
        failed = await _watch(workers, report)
    finally:
        for worker in workers:
            if worker.is_alive():
                worker.terminate()  # the others' work is lost with the failed one's
            worker.join()
    failed = failed or [worker for worker in workers if worker.exitcode != 0]
    if failed:
        names = ", ".join(f"{worker.name} (exit code {worker.exitcode})" for worker in failed)
        raise RuntimeError(f"replay worker {names} failed; its log is above, and the new generation is abandoned")


async def _watch(workers: list[multiprocessing.Process], report: Callable[[], None]) -> list[multiprocessing.Process]:
    """Until every worker is done: return the workers that failed (as soon as one has), reporting
    progress meanwhile."""
    while any(worker.is_alive() for worker in workers):
        failed = [worker for worker in workers if worker.exitcode not in (None, 0)]
        if failed:
            return failed
        report()
        await asyncio.sleep(0.2)
    return []


def worker_consumer(name: str, part: int) -> str:
    """The consumer a worker reads its partitions of the log with."""
    return f"{name}-p{part}"
