"""The parallel first pass of a rebuild: one process reads the log, worker processes fold shares of it.

A claim's page and its contributors' rows depend on that claim's events alone, so shares of the
claims fold independently. On a partitioned log each worker process reads its own partitions
(``k % parts``) from the log, so no process receives the whole log; on a log stored before partitions
``build_in_parallel`` reads the log once (``distribute``) and sends each worker process its share of
every batch down a pipe; each worker folds into a place of its own, so
that no two processes contend for one SQLite file; the places are then merged into the generation.
``services/rebuild/replay.py`` decides when this pays and catches up from where it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import pickle
import time
from collections.abc import Callable
from multiprocessing.connection import Connection as PipeEnd

from projections.registry import build_projections
from projections.tables import checkpoints
from services.log import ClaimLog, Delivery, NatsTls
from services.log.signing import signature_headers
from services.projector.runner import claim_partition
from services.rebuild.worker import REPLAY_BATCH, partition_main
from services.runtime.compose import nats_tls, stream_spec
from services.runtime.settings import Settings
from services.store.bulk_build import drop_secondary, restore_secondary
from services.store.generations import Generations

log = logging.getLogger(__name__)
Progress = Callable[[int, int], None]  # (applied through, head of the log)


async def build_in_parallel(
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

    The first worker folds into the generation itself, the others into places merged into it
    afterwards; the generation's checkpoints then stand at ``head``.
    """
    # The first share is folded straight into the generation (nothing reads it yet), so only the
    # others are merged: the merge copies every page of the other shares, hundreds of MB on a large log.
    generations.engine(number).dispose()  # the first worker's scratch engine must be the file's only one
    places = [generations.place(number)] + [generations.partition(number, part) for part in range(1, parts)]
    started = time.monotonic()
    await _fold(claim_log, nats_url, stream_spec(settings), places, head, name, progress, nats_tls(settings))
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


async def _fold(
    claim_log: ClaimLog, nats_url: str, spec, places: list, head: int, name: str, progress: Progress | None, tls: NatsTls | None = None
) -> None:
    """Start a worker process per place, feed them the log through ``head``, and wait for them all.

    A failed read or a failed worker ends the fold at once: the other workers are stopped, and the
    error names the worker that failed on its own.
    """
    parts = len(places)
    context = multiprocessing.get_context("spawn")
    counters = [context.Value("q", 0) for _ in range(parts)]
    # A partitioned log: each worker reads its own partitions (k % parts), so no process receives the
    # whole log. Otherwise this process reads it once and sends each worker its share of the claims.
    own = claim_log.layout.partitioned
    pipes = [] if own else [context.Pipe(duplex=False) for _ in range(parts)]  # (receiving end, sending end)
    workers = [
        context.Process(
            target=partition_main,
            args=(nats_url, spec, place, part, parts, head, worker_consumer(name, part), counters[part], None if own else pipes[part][0], tls),
            name=f"claimlog-replay-p{part}",
            daemon=True,
        )
        for part, place in enumerate(places)
    ]
    for worker in workers:
        worker.start()
    for receiving, _ in pipes:
        receiving.close()  # the worker's copy is the only one left: its exit breaks the pipe

    def report() -> None:
        if progress:
            progress(min(counter.value for counter in counters), head)

    sending = [end for _, end in pipes]
    distributing = asyncio.create_task(asyncio.sleep(0) if own else distribute(claim_log, reader_consumer(name), head, sending))
    try:
        failed = await _watch(distributing, workers, report)
    finally:
        distributing.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await distributing
        for worker in workers:
            if worker.is_alive():
                worker.terminate()  # the others' work is lost with the failed one's
            worker.join()
        for _, sending in pipes:
            sending.close()
    failed = failed or [worker for worker in workers if worker.exitcode != 0]
    if failed:
        names = ", ".join(f"{worker.name} (exit code {worker.exitcode})" for worker in failed)
        raise RuntimeError(f"replay worker {names} failed; its log is above, and the new generation is abandoned")


async def _watch(distributing: asyncio.Task, workers: list[multiprocessing.Process], report: Callable[[], None]) -> list[multiprocessing.Process]:
    """Until the reader and every worker are done: raise the reader's failure, or return the workers
    that failed (as soon as one has), reporting progress meanwhile."""
    while not distributing.done() or any(worker.is_alive() for worker in workers):
        if distributing.done():
            distributing.result()
        failed = [worker for worker in workers if worker.exitcode not in (None, 0)]
        if failed:
            return failed
        report()
        await asyncio.sleep(0.2)
    distributing.result()
    return []


def worker_consumer(name: str, part: int) -> str:
    """The consumer a worker reads the log with when it folds its share again by itself."""
    return f"{name}-p{part}"


def reader_consumer(name: str) -> str:
    """The consumer that reads the log once for every worker."""
    return f"{name}-reader"


async def distribute(claim_log: ClaimLog, name: str, head: int, sending: list[PipeEnd]) -> None:
    """Read the log through ``head`` once and send each worker its share of every batch, then ``None``.

    Each worker reading the whole log itself and skipping the others' events would cost it a large
    share of its CPU time, and the server would send every event once per worker. A worker that has stopped taking
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
        shares[claim_partition(delivery.subject, parts)].append(
            (delivery.seq, delivery.subject, delivery.data, *delivery.stamp(), signature_headers(delivery.headers))
        )
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
