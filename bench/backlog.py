"""Projector throughput on a backlog: publish N events, then time the projector applying them all.

    python bench/backlog.py [--events 100000] [--claims 10000] [--database URL]

Prints claimlog's projector rate next to a minimal peer (plain nats-py pull fetch(1000) writing one
counts row per claim with stdlib sqlite3, checkpoint in the same transaction) on the same log.
Several projector workers on a partitioned log are measured by bench/scale.py.
Target: 20,000 events/s or more into SQLite on a 2-core machine, so that a projector that fell behind
(a restart, a burst of imports) is back at the head within seconds of a normal day's traffic.
"""

from __future__ import annotations

import argparse
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
from services.runtime.db import make_engine, upgrade  # noqa: E402
from services.runtime.embedded import EmbeddedNats  # noqa: E402
from services.runtime.from_settings import run  # noqa: E402

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
        peer = await peer_projector(url, workdir / "peer.sqlite3", head) if not args.no_peer else None
        await nc.close()
    finally:
        server.stop()
    report(head, publish_rate, ours, peer, memory, database.split(":")[0], args.sync)


def report(head: int, publish_rate: float, ours: float, peer: float | None, memory: float, db: str, sync: str) -> None:
    table = Table(title=f"projector backlog: {head:,} events, {db}, nats sync_interval={sync}")
    table.add_column("what")
    table.add_column("events/s", justify="right")
    table.add_row("publish (pipelined appends, msg ids, expected seq)", f"{publish_rate:,.0f}")
    table.add_row("claimlog projector (claim pages, one txn per batch + checkpoint)", f"{ours:,.0f}")
    if peer is not None:
        table.add_row("peer: nats-py fetch(1000) + sqlite3 counts upsert", f"{peer:,.0f}")
        table.add_row("ratio claimlog / peer", f"{ours / peer:.2f}")
    table.add_row("peak RSS of the benchmark process (MB)", f"{memory:,.0f}")
    console.print(table)
    record("projector, one process", ours, unit="events/s", peer=peer)
    console.print(f"target: >= 20,000 events/s -> one process: {'met' if ours >= 20_000 else 'NOT met'}")


if __name__ == "__main__":
    parser = arguments(__doc__)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--claims", type=int, default=10_000)
    parser.add_argument("--database", help="SQLAlchemy URL of an empty database (default: a fresh SQLite file)")
    parser.add_argument("--no-peer", action="store_true")
    run(main(parser.parse_args()))
