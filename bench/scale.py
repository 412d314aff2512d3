"""Scaling the projection out: the same partitioned log folded into PostgreSQL by 1, 2 and 4 workers.

    python bench/scale.py [--events 200000] [--claims 20000] [--postgres URL] [--workers 1 2 4] [--small]

Each worker is a process of its own folding the partitions ``k % n == i`` of the log with one runner
per partition (``Scope(partition=k)``, whose durable consumer the server filters to that partition),
into a fresh database per number of workers; the partitions are given out statically so the figures
measure the folding, not the seconds leases take to settle. Per number of workers it prints:

- events/s, from the first worker's start (its imports done) to the last partition's last event committed;
- the events (the consumers' delivered counts) and bytes (each connection's received bytes) each
  worker received, as a share of the log: target at most 1/n + 5%;
- CPU-seconds per event summed over the workers (from their start, imports done) and the nats-server
  (from the first process started to the last result): target, with 4 workers, at most
  1.15x that of one (the peer of each figure is one worker in the same run).

These machines have 2 cores, so events/s cannot double here: the bytes and the CPU per event show how
the work divides. ``--small`` runs a tiny log (a smoke test runs it); ``--no-record`` leaves
bench/results.csv alone.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import resource
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402
from sqlalchemy import create_engine, make_url, text  # noqa: E402

from bench.common import publish_backlog  # noqa: E402
from bench.partitions import server_cpu_seconds  # noqa: E402
from bench.results import record  # noqa: E402
from projections.registry import build_projections  # noqa: E402
from services.log import ClaimLog, StreamSpec, connect  # noqa: E402
from services.projector.runner import Runner, Scope  # noqa: E402
from services.projector.writer import CheckpointedWriter  # noqa: E402
from services.runtime.db import make_engine, upgrade  # noqa: E402
from services.runtime.embedded import EmbeddedNats  # noqa: E402

console = Console()
BATCH = 1000


def worker_main(nats_url: str, database_url: str, lasts: dict[int, int], me: int, workers: int, results) -> None:
    """A worker process: fold partitions ``k % workers == me`` through their last events; report what it received."""
    results.put(asyncio.run(_fold(nats_url, database_url, lasts, me, workers)))


async def _fold(nats_url: str, database_url: str, lasts: dict[int, int], me: int, workers: int) -> dict:
    nc = await connect(nats_url)
    claim_log = ClaimLog(nc, StreamSpec("CLAIMS"))
    engine = make_engine(database_url)
    # Timed from here: a spawned process's imports are a fixed cost, not the folding's.
    began, before = time.time(), resource.getrusage(resource.RUSAGE_SELF)
    mine = {k: last for k, last in lasts.items() if k % workers == me}
    names = {k: f"scale-n{workers}-p{k}" for k in mine}

    # As much in flight per process as one projector of the whole log has: a batch of BATCH shared by the
    # runners (each consumer asks for two batches ahead; 16 runners of BATCH each overran the connection).
    batch = max(50, BATCH // max(len(mine), 1))

    async def fold(k: int) -> None:
        writer = CheckpointedWriter(engine, build_projections(), partitions=claim_log.layout.partitions)
        runner = Runner(claim_log, writer, name=names[k], batch=batch, scope=Scope(partition=k), epoch=1)
        await runner.run_until(mine[k], timeout=3600)

    await asyncio.gather(*(fold(k) for k in mine))
    js = nc.jetstream()
    delivered = 0
    for name in names.values():
        delivered += (await js.consumer_info("CLAIMS", name)).delivered.consumer_seq
        await claim_log.forget_consumer(name)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage.ru_utime + usage.ru_stime - before.ru_utime - before.ru_stime
    received = {"events": delivered, "bytes": nc.stats["in_bytes"], "cpu": cpu, "began": began, "ended": time.time(), "partitions": sorted(mine)}
    await nc.close()
    engine.dispose()
    return received


def fresh_database(admin_url: str) -> str:
    """A new, migrated PostgreSQL database next to ``admin_url``'s."""
    name = f"claimlog_scale_{uuid.uuid4().hex[:10]}"
    admin = create_engine(admin_url.replace("postgresql://", "postgresql+psycopg://"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    url = make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    engine = make_engine(url)
    upgrade(engine)
    engine.dispose()
    return url


def drop_database(admin_url: str, url: str) -> None:
    admin = create_engine(admin_url.replace("postgresql://", "postgresql+psycopg://"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{make_url(url).database}" WITH (FORCE)'))
    admin.dispose()


def fold_with(workers: int, nats_url: str, server_pid: int, admin_url: str, lasts: dict[int, int], head: int) -> dict:
    """Fold the log with ``workers`` processes into a fresh database; their figures."""
    database = fresh_database(admin_url)
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    processes = [
        context.Process(target=worker_main, args=(nats_url, database, lasts, me, workers, results), name=f"scale-worker-{me}")
        for me in range(workers)
    ]
    try:
        server_before = server_cpu_seconds(server_pid)
        for process in processes:
            process.start()
        got = [results.get(timeout=3600) for _ in processes]
        wall = max(w["ended"] for w in got) - min(w["began"] for w in got)
        server_cpu = server_cpu_seconds(server_pid) - server_before
        for process in processes:
            process.join()
        if any(process.exitcode != 0 for process in processes):
            raise RuntimeError(f"a worker failed: exit codes {[p.exitcode for p in processes]}")
    finally:
        for process in processes:
            if process.is_alive():
                process.terminate()
        drop_database(admin_url, database)
    received = sum(w["events"] for w in got)
    if received < head:
        raise RuntimeError(f"the workers received {received} events of {head}")
    return {
        "rate": head / wall,
        "events_share": max(w["events"] for w in got) / head,
        "bytes_share": max(w["bytes"] for w in got) / sum(w["bytes"] for w in got),
        "bytes": [w["bytes"] for w in got],
        "events": [w["events"] for w in got],
        "cpu_per_event": (sum(w["cpu"] for w in got) + server_cpu) / head,
        "server_cpu": server_cpu,
    }


async def publish(url: str, claims: int, per_claim: int) -> tuple[int, dict[int, int]]:
    nc = await connect(url)
    claim_log = ClaimLog(nc, StreamSpec("CLAIMS"))
    await claim_log.ensure()
    head = await publish_backlog(claim_log, claims=claims, per_claim=per_claim)
    layout, js = claim_log.layout, nc.jetstream()
    lasts = {}
    for k in range(layout.partitions):
        last = await js.get_last_msg("CLAIMS", layout.partition_filter(k), direct=True)
        lasts[k] = last.seq
    await nc.close()
    return head, lasts


def main(args: argparse.Namespace) -> None:
    if args.small:
        args.events, args.claims = 4_000, 400
    workdir = Path(tempfile.mkdtemp(prefix="claimlog-scale-"))
    server = EmbeddedNats(workdir / "nats", sync=args.sync)
    url = server.start()
    figures: dict[int, dict] = {}
    try:
        head, lasts = asyncio.run(publish(url, args.claims, args.events // args.claims))
        for workers in args.workers:
            figures[workers] = fold_with(workers, url, server.process.pid, args.postgres, lasts, head)
            console.print(f"{workers} worker(s): {figures[workers]['rate']:,.0f} events/s")
    finally:
        server.stop()
    report(head, len(lasts), figures, record_them=not args.no_record, small=args.small)


def report(head: int, partitions: int, figures: dict[int, dict], *, record_them: bool, small: bool) -> None:
    one = figures.get(1)
    table = Table(title=f"{head:,} events in {partitions} partitions, folded into PostgreSQL")
    for column in ("workers", "events/s", "most events to one worker (of the log)", "most bytes to one worker (of all)", "CPU us/event (workers + nats)", "vs 1 worker"):
        table.add_column(column, justify="right")
    for n, f in figures.items():
        ratio = f"{f['cpu_per_event'] / one['cpu_per_event']:.2f}x" if one else "-"
        table.add_row(str(n), f"{f['rate']:,.0f}", f"{f['events_share']:.1%} (target <= {1 / n + 0.05:.1%})",
                      f"{f['bytes_share']:.1%}", f"{f['cpu_per_event'] * 1e6:,.0f}", ratio)
    console.print(table)
    if not record_them:
        return
    note = f"{head} events, {partitions} partitions, PostgreSQL, workers as processes with static partitions" + (", --small" if small else "")
    for n, f in figures.items():
        peer = one if n != 1 else None
        record(f"scale: {n} worker(s), events/s", f["rate"], unit="events/s", peer=peer and peer["rate"], note=note)
        record(f"scale: {n} worker(s), most events to one worker", f["events_share"] * 100, unit="% of log",
               peer=round(100 / n + 5, 1), note=note + "; peer: the target 1/n + 5%")
        record(f"scale: {n} worker(s), most bytes to one worker", f["bytes_share"] * 100, unit="% of bytes", peer=round(100 / n, 1),
               note=note + "; peer: an even split")
        record(f"scale: {n} worker(s), CPU per event (workers + nats-server)", f["cpu_per_event"] * 1e6, unit="us",
               peer=peer and peer["cpu_per_event"] * 1e6, note=note + "; peer: one worker, same run (target: 4 workers <= 1.15x)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sync", default="always", help="embedded nats-server sync_interval (always, or e.g. 2m)")
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--claims", type=int, default=20_000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--postgres", default=os.environ.get("CLAIMLOG_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"),
                        help="URL of a PostgreSQL database whose server the bench makes its databases on")
    parser.add_argument("--small", action="store_true", help="a tiny log (4,000 events), for a smoke test")
    parser.add_argument("--no-record", action="store_true", help="print the figures without appending them to bench/results.csv")
    main(parser.parse_args())
