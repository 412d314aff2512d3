"""Projector throughput on a backlog: publish N events, then time the projector applying them all.

    python bench/backlog.py [--events 100000] [--claims 10000] [--database URL] [--shares 2]

Prints claimlog's projector rate next to a minimal peer (plain nats-py pull fetch(1000) writing one
counts row per claim with stdlib sqlite3, checkpoint in the same transaction) on the same log.
With ``--shares N`` (N > 1) it also runs the projector as N processes, one share of the claims each
(CLAIMLOG_PROJECTOR_SHARES, services/projector/shares.py), into a fresh SQLite file: timed from the
start of the processes, and from the moment every share has committed its first batch (what the
rate is once they run, without the seconds a spawned process takes to import everything).
Target: 20,000 events/s or more into SQLite on a 2-core machine, so that a projector that fell behind
(a restart, a burst of imports) is back at the head within seconds of a normal day's traffic.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from bench.common import PeerCounts, arguments, peak_rss_mb, publish_backlog  # noqa: E402
from bench.results import record  # noqa: E402
from projections.registry import build_projections  # noqa: E402
from services.log import ClaimLog, StreamSpec, connect  # noqa: E402
from services.projector import Projector  # noqa: E402
from services.projector.shares import Shares  # noqa: E402
from services.read_api.queries import positions  # noqa: E402
from services.runtime.compose import run  # noqa: E402
from services.runtime.db import make_engine, upgrade  # noqa: E402
from services.runtime.embedded import EmbeddedNats  # noqa: E402
from services.runtime.settings import Settings  # noqa: E402

console = Console()


async def claimlog_projector(claim_log: ClaimLog, database_url: str, head: int) -> float:
    engine = make_engine(database_url)
    upgrade(engine)
    projector = Projector(claim_log, engine, build_projections(), name="bench", batch=1000)
    started = time.perf_counter()
    await projector.run_until(head, timeout=3600)
    elapsed = time.perf_counter() - started
    engine.dispose()
    return head / elapsed


async def sharing_projector(nats_url: str, database_url: str, head: int, shares: int) -> tuple[float, float]:
    """The projector as ``shares`` processes, as `claimlog projector` runs them: events/s from their
    start, and from the moment every share has committed a batch."""
    engine = make_engine(database_url)
    upgrade(engine)
    settings = Settings(nats_url=nats_url, database_url=database_url, projector_name="bench", projector_shares=shares)
    stop = asyncio.Event()
    started = time.perf_counter()
    running = asyncio.create_task(Shares(settings, nats_url).run(stop))
    first: tuple[float, int] | None = None
    try:
        while (seq := _lowest(engine)) < head:
            if running.done():
                running.result()
            if first is None and seq > 0:
                first = (time.perf_counter(), seq)
            await asyncio.sleep(0.05)  # a look costs this process about a millisecond of CPU
        ended = time.perf_counter()
    finally:
        stop.set()
        await running
        engine.dispose()
    assert first is not None
    return head / (ended - started), (head - first[1]) / (ended - first[0])


def _lowest(engine) -> int:
    """The lowest checkpoint of the shares, as reads see it (0 until each has committed a batch)."""
    with engine.connect() as conn:
        return min(positions(conn).values(), default=0)


async def peer_projector(nats_url: str, path: Path, head: int) -> float:
    """The simplest honest projector: fetch(1000), count per claim, upsert with sqlite3, ack the last."""
    import nats

    peer = PeerCounts(path)
    nc = await nats.connect(nats_url)
    from nats.js.api import AckPolicy, ConsumerConfig

    config = ConsumerConfig(ack_policy=AckPolicy.ALL, max_ack_pending=4000)
    sub = await nc.jetstream().pull_subscribe("claims.>", durable="peer", stream="CLAIMS", config=config)
    started, applied = time.perf_counter(), 0
    while applied < head:
        try:
            msgs = await sub.fetch(1000, timeout=1)
        except (TimeoutError, nats.errors.TimeoutError):
            continue
        peer.apply((msg.data for msg in msgs), msgs[-1].metadata.sequence.stream)
        await msgs[-1].ack()
        applied += len(msgs)
    elapsed = time.perf_counter() - started
    await nc.close()
    peer.close()
    return head / elapsed


async def main(args: argparse.Namespace) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="claimlog-bench-"))
    server = EmbeddedNats(workdir / "nats", sync=args.sync)
    url = server.start()
    try:
        nc = await connect(url)
        claim_log = ClaimLog(nc, StreamSpec("CLAIMS"))
        await claim_log.ensure()
        started = time.perf_counter()
        head = await publish_backlog(claim_log, claims=args.claims, per_claim=args.events // args.claims)
        publish_rate = head / (time.perf_counter() - started)
        database = args.database or f"sqlite:///{workdir / 'claimlog.sqlite3'}"
        ours = await claimlog_projector(claim_log, database, head)
        memory = peak_rss_mb()
        shared = None
        if args.shares > 1:
            shared = await sharing_projector(url, f"sqlite:///{workdir / 'shares.sqlite3'}", head, args.shares)
        peer = await peer_projector(url, workdir / "peer.sqlite3", head) if not args.no_peer else None
        await nc.close()
    finally:
        server.stop()
    report(head, publish_rate, ours, peer, memory, database.split(":")[0], args.sync, args.shares, shared)


def report(
    head: int, publish_rate: float, ours: float, peer: float | None, memory: float, db: str, sync: str,
    shares: int, shared: tuple[float, float] | None,
) -> None:
    table = Table(title=f"projector backlog: {head:,} events, {db}, nats sync_interval={sync}")
    table.add_column("what")
    table.add_column("events/s", justify="right")
    table.add_row("publish (pipelined appends, msg ids, expected seq)", f"{publish_rate:,.0f}")
    table.add_row("claimlog projector (claim pages, one txn per batch + checkpoint)", f"{ours:,.0f}")
    if shared is not None:
        table.add_row(f"claimlog projector as {shares} share processes, SQLite, from their start", f"{shared[0]:,.0f}")
        table.add_row(f"claimlog projector as {shares} share processes, once each has committed", f"{shared[1]:,.0f}")
    if peer is not None:
        table.add_row("peer: nats-py fetch(1000) + sqlite3 counts upsert", f"{peer:,.0f}")
        table.add_row("ratio claimlog / peer", f"{ours / peer:.2f}")
        if shared is not None:
            table.add_row(f"ratio claimlog in {shares} shares (from their start) / peer", f"{shared[0] / peer:.2f}")
    table.add_row("peak RSS of the benchmark process (MB)", f"{memory:,.0f}")
    console.print(table)
    record("projector, one process", ours, unit="events/s", peer=peer)
    if shared is not None:
        record(f"projector, {shares} shares, from their start", shared[0], unit="events/s", peer=peer)
        record(f"projector, {shares} shares, once running", shared[1], unit="events/s", peer=peer)
    console.print(f"target: >= 20,000 events/s -> one process: {'met' if ours >= 20_000 else 'NOT met'}", end="")
    if shared is not None:
        console.print(f"; {shares} shares, from their start: {'met' if shared[0] >= 20_000 else 'NOT met'}", end="")
    console.print()


if __name__ == "__main__":
    parser = arguments(__doc__)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--claims", type=int, default=10_000)
    parser.add_argument("--database", help="SQLAlchemy URL of an empty database (default: a fresh SQLite file)")
    parser.add_argument("--no-peer", action="store_true")
    parser.add_argument("--shares", type=int, default=2, help="Also run the projector as this many share processes (1: do not).")
    run(main(parser.parse_args()))
