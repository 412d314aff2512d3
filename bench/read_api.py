"""The read API under load: 100,000 claims folded from a million events, read by a separate process.

    python bench/read_api.py [--claims 100000] [--per-claim 10] [--database URL] [--rate 200] [--seconds 15]

Builds the read models with the projector's own code (the projections fold generated events straight
into the database: this benchmark measures reads, bench/backlog.py measures the projector), starts
`claimlog api` as a separate process, and from this process requests, at a fixed rate (open loop) over
keep-alive connections: claim pages, counts, a filtered listing, and a full-text search. It prints
p50/p99 latency and the rate achieved per kind, and, as the peer in the same run, the claim page's SQL
alone (the indexed read, no HTTP). Targets: claim page p99 < 20 ms at 200 requests/s and search p99 < 50 ms
on 100,000 claims, so that the registry reads as fast as a static page at its expected size. Run it with a PostgreSQL URL to measure PostgreSQL.
"""

from __future__ import annotations

import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402
from sqlalchemy import Engine, func, insert, select  # noqa: E402

from bench.common import KeepAlive, arguments, percentile, progress  # noqa: E402
from bench.latency import paced, start, wait_healthy  # noqa: E402
from bench.results import record  # noqa: E402
from projections.base import Record  # noqa: E402
from projections.registry import build_projections  # noqa: E402
from projections.tables import checkpoints, claim_pages  # noqa: E402
from services.log import ClaimLog, StreamSpec, connect  # noqa: E402
from services.runtime.db import make_engine, upgrade  # noqa: E402
from services.runtime.embedded import EmbeddedNats  # noqa: E402
from services.runtime.from_settings import run  # noqa: E402
from tests.builders.workload import TOPICS, WORDS, claim_events  # noqa: E402

console = Console()


def load(engine: Engine, claims: int, per_claim: int) -> int:
    """Fold claims x per_claim generated events into the read models, 1,000 events per transaction."""
    projections = build_projections()
    rng = random.Random(7)
    seq, batch = 0, []
    with progress() as bar:
        task = bar.add_task("fold into the read models", total=claims * per_claim, rate="")
        for number in range(claims):
            for event in claim_events(number, per_claim, rng):
                seq += 1
                batch.append(Record(seq, event.occurred_at, event))
            if len(batch) >= 1000 or number == claims - 1:
                with engine.begin() as conn:
                    for projection in projections:
                        projection.apply_batch(conn, batch)
                bar.update(task, advance=len(batch))
                batch = []
    with engine.begin() as conn:
        conn.execute(insert(checkpoints), [{"name": p.name, "version": p.version, "last_seq": seq} for p in projections])
    return seq


async def measure_kind(getter: KeepAlive, paths, rate: float, seconds: float) -> tuple[list[float], int, float]:
    failures = 0

    async def one(i: int) -> float:
        nonlocal failures
        started = time.perf_counter()
        if (await getter.request("GET", paths(i)))[0] != 200:
            failures += 1
        return (time.perf_counter() - started) * 1000

    began = time.perf_counter()
    latencies = await paced(rate, seconds, one)
    return latencies, failures, len(latencies) / (time.perf_counter() - began)


def direct_page_reads(engine: Engine, claims: int, count: int = 2000) -> list[float]:
    """The peer: the claim page's indexed read alone, through SQLAlchemy, no HTTP."""
    rng = random.Random(3)
    latencies = []
    with engine.connect() as conn:
        for _ in range(count):
            started = time.perf_counter()
            conn.execute(select(claim_pages.c.doc).where(claim_pages.c.claim_id == f"CLM-{rng.randrange(claims):07d}")).scalar()
            latencies.append((time.perf_counter() - started) * 1000)
    return latencies


async def main(args) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="claimlog-read-"))
    database = args.database or f"sqlite:///{workdir / 'claimlog.sqlite3'}"
    engine = make_engine(database)
    upgrade(engine)
    with engine.connect() as conn:
        present = conn.execute(select(func.count()).select_from(claim_pages)).scalar()
    if present == args.claims and args.database:
        console.print(f"the database already holds {present:,} claims: measuring them (drop it to fold again)")
        events = args.claims * args.per_claim
    else:
        started = time.perf_counter()
        events = load(engine, args.claims, args.per_claim)
        console.print(f"folded {events:,} events of {args.claims:,} claims in {time.perf_counter() - started:.0f} s")
    # A loaded database as it runs in production: statistics gathered, pages visible without heap checks.
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("VACUUM ANALYZE" if engine.dialect.name == "postgresql" else "ANALYZE")
    server = EmbeddedNats(workdir / "nats")
    url = server.start()
    nc = await connect(url)
    await ClaimLog(nc, StreamSpec("CLAIMS")).ensure()
    await nc.close()
    env = {**os.environ, "CLAIMLOG_NATS_URL": url, "CLAIMLOG_DATABASE_URL": database, "CLAIMLOG_API_PORT": str(args.port)}
    api = start(["api", "--read-only"], env)
    rng = random.Random(11)
    claim = lambda i: f"CLM-{rng.randrange(args.claims):07d}"  # noqa: E731
    kinds = {
        "claim page": (lambda i: f"/claims/{claim(i)}", args.rate),
        "counts": (lambda i: f"/claims/{claim(i)}/counts", args.rate),
        "listing, filtered": (lambda i: f"/claims?capability=Capability%20{i % 12}&limit=20", args.rate / 4),
        "search": (lambda i: f"/claims?q={rng.choice(TOPICS)}%20{rng.choice(WORDS)}&limit=20", args.rate / 4),
    }
    results = {}
    try:
        await wait_healthy(f"http://127.0.0.1:{args.port}")
        getter = KeepAlive(args.port)
        await getter.open()
        await measure_kind(getter, kinds["claim page"][0], args.rate, 3)  # warm-up: connections, caches, code paths
        for name, (paths, rate) in kinds.items():
            results[name] = (rate, *await measure_kind(getter, paths, rate, args.seconds))
    finally:
        api.terminate()
        api.wait()
        server.stop()
    peer = direct_page_reads(engine, args.claims)
    table = Table(title=f"read API, {args.claims:,} claims / {events:,} events, {engine.dialect.name}, {args.seconds:.0f} s per kind")
    for column in ("request", "asked /s", "served /s", "p50 ms", "p99 ms", "max ms", "failed"):
        table.add_column(column, justify="left" if column == "request" else "right")
    for name, (rate, latencies, failures, served) in results.items():
        table.add_row(name, f"{rate:.0f}", f"{served:.0f}", f"{percentile(latencies, 50):.1f}", f"{percentile(latencies, 99):.1f}", f"{max(latencies):.1f}", str(failures))
    table.add_row("peer: the page's SQL alone", "", "", f"{percentile(peer, 50):.2f}", f"{percentile(peer, 99):.2f}", f"{max(peer):.1f}", "")
    console.print(table)
    page_p99, search_p99 = percentile(results["claim page"][1], 99), percentile(results["search"][1], 99)
    database_name = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}.get(engine.dialect.name, engine.dialect.name)
    for name, (_, latencies, _, _) in results.items():
        peer_p99 = percentile(peer, 99) if name == "claim page" else None
        record(f"{name} p99 ({database_name})", percentile(latencies, 99), unit="ms", peer=peer_p99)
    console.print(
        f"targets: claim page p99 < 20 ms -> {'met' if page_p99 < 20 else 'NOT met'}; "
        f"search p99 < 50 ms -> {'met' if search_p99 < 50 else 'NOT met'}"
    )


if __name__ == "__main__":
    parser = arguments(__doc__)
    parser.add_argument("--claims", type=int, default=100_000)
    parser.add_argument("--per-claim", type=int, default=10)
    parser.add_argument("--database", default=None)
    parser.add_argument("--rate", type=float, default=200)
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--port", type=int, default=18767)
    run(main(parser.parse_args()))
