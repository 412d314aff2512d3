"""From `claimlog up` to ready on a registry that already holds a large log, driven as an operator runs it.

    python bench/startup.py [--claims 200000] [--per-claim 5] [--cluster 3] [--workers 2] [--postgres URL]

In a fresh directory: `claimlog up` (the embedded default, or ``--cluster N``), `claimlog actors add`,
`claimlog ingest` of a JSON Lines file of claims x per-claim commands, wait until every event is
folded; stop with SIGINT; then `claimlog up` again, timed until `/health/ready` answers 200. The peer,
in the same run, is the same `claimlog up` on an empty registry: what starting costs with nothing to
catch up. Prints both, the fold rate of the first start, and appends them to bench/results.csv.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402
from sqlalchemy import create_engine, text  # noqa: E402
from sqlalchemy.engine import make_url  # noqa: E402

from bench.common import arguments  # noqa: E402
from bench.results import record  # noqa: E402
from tests.builders.workload import write_commands  # noqa: E402

console = Console()
CLAIMLOG = [sys.executable, "-m", "services.cli"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Registry:
    """One `claimlog up` in a directory of its own, started and stopped as an operator does."""

    def __init__(self, home: Path, *, cluster: int, workers: int, database_url: str | None) -> None:
        self.home, self.port = home, free_port()
        self.args = ["up", "--port", str(self.port)] + (["--cluster", str(cluster)] if cluster else [])
        self.args += ["--workers", str(workers)] if workers > 1 else []
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("CLAIMLOG_")}
        if database_url:
            self.env["CLAIMLOG_DATABASE_URL"] = database_url
        self.process: subprocess.Popen | None = None

    def start(self) -> float:
        """Start `claimlog up`; the seconds until `/health/ready` answers 200."""
        started = time.perf_counter()
        log = (self.home / "up.log").open("a")
        self.process = subprocess.Popen(CLAIMLOG + self.args, cwd=self.home, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        self.wait(lambda health, ready: ready, what="ready")
        return time.perf_counter() - started

    def wait(self, done, *, what: str, timeout: float = 3600.0) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"claimlog up exited with {self.process.returncode}; see {self.home / 'up.log'}")
            try:
                ready = httpx.get(f"http://127.0.0.1:{self.port}/health/ready", timeout=5).status_code == 200
                health = httpx.get(f"http://127.0.0.1:{self.port}/health", timeout=5).json()
                if done(health, ready):
                    return health
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise SystemExit(f"not {what} within {timeout:.0f}s; see {self.home / 'up.log'}")

    def cli(self, *args: str) -> str:
        done = subprocess.run(CLAIMLOG + list(args), cwd=self.home, env=self.env, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"claimlog {' '.join(args)} failed: {done.stderr[-2000:]}")
        return done.stdout

    def stop(self) -> None:
        self.process.send_signal(signal.SIGINT)
        self.process.wait(timeout=120)


@contextmanager
def databases(postgres: str | None, count: int) -> Iterator[list[str | None]]:
    """``count`` fresh PostgreSQL databases on the server of ``postgres`` (dropped after), or SQLite (None) for each."""
    if postgres is None:
        yield [None] * count
        return
    admin = create_engine(postgres.replace("postgresql://", "postgresql+psycopg://"), isolation_level="AUTOCOMMIT")
    names = [f"claimlog_startup_{uuid.uuid4().hex[:12]}" for _ in range(count)]
    try:
        with admin.connect() as conn:
            for name in names:
                conn.execute(text(f'CREATE DATABASE "{name}"'))
        yield [make_url(postgres).set(database=name).render_as_string(hide_password=False) for name in names]
    finally:
        with admin.connect() as conn:
            for name in names:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def caught_up(health: dict, ready: bool) -> bool:
    """Every event in the log is folded: the registry-wide position has reached the head."""
    lag = health.get("lag_events") or {}
    return ready and bool(lag) and not any(lag.values())


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--claims", type=int, default=200_000)
    parser.add_argument("--per-claim", type=int, default=5)
    parser.add_argument("--cluster", type=int, default=0, metavar="N")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--postgres", default=None, metavar="URL",
                        help="a PostgreSQL server (its admin database's URL): each registry's read models in a database of its own there "
                             "(default: SQLite in the data directory)")
    options = parser.parse_args()
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp, databases(options.postgres, 2) as (peer_db, full_db):
        empty = Registry(Path(tmp) / "empty", cluster=options.cluster, workers=options.workers, database_url=peer_db)
        empty.home.mkdir()
        peer = empty.start()
        empty.stop()
        home = Path(tmp) / "full"
        home.mkdir()
        lines = write_commands(home / "commands.jsonl", claims=options.claims, per_claim=options.per_claim)
        registry = Registry(home, cluster=options.cluster, workers=options.workers, database_url=full_db)
        registry.start()
        token = registry.cli("actors", "add", "ingest-bot", "--kind", "model", "--model", "pipeline-2").strip().splitlines()[-1]
        began = time.perf_counter()
        registry.cli("ingest", "--token", token, "commands.jsonl")
        health = registry.wait(caught_up, what="caught up")
        fold = lines / (time.perf_counter() - began)
        registry.stop()
        again = registry.start()
        health = registry.wait(caught_up, what="caught up")
        registry.stop()
    where = f"{options.cluster}-node cluster, {options.workers} worker(s)" if options.cluster else "embedded"
    where += ", PostgreSQL" if options.postgres else ", SQLite"
    table = Table(title=f"claimlog up to ready: {lines:,} events ({where}; load {load:.1f} at start)")
    for column in ("", "seconds"):
        table.add_column(column, justify="right" if column else "left")
    table.add_row(f"up -> ready, {health['head']:,}-event registry", f"{again:.1f}")
    table.add_row("up -> ready, empty registry (peer)", f"{peer:.1f}")
    table.add_row("first start: ingest + fold, events/s", f"{fold:,.0f}")
    console.print(table)
    note = f"{where}; load {load:.1f}"
    record(f"up to ready, {lines:,} events", again, unit="s", peer=peer, note=note)
    record("ingest and fold after up", fold, unit="events/s", note=note)


if __name__ == "__main__":
    main()
