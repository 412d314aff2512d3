"""Live pages under load: one API process with 1,000 open claim streams and 10 registry streams, 200 events/s.

    python bench/live.py [--streams 1000] [--registry 10] [--rate 200] [--seconds 20]

Runs the real services as separate processes (`claimlog projector`, `claimlog api`) on an embedded
nats-server and SQLite, opens the streams from this process (one per claim, over as many claims, and the
registry-wide ones), then appends events at the rate to claims with an open stream. It times, for each
event, the commit notice (heard by this process on the notice subject, as the API hears it) to its
message on the claim's stream: commit to delivery. The peer in the same run is the fastest a client could
learn of the change without a stream: polling the read model's row (SQLite, every millisecond, in a thread),
timed from the same notices. Memory per open stream is the API process's resident memory with the streams
open, less before, over the streams. Target: commit to delivery p99 at most 50 ms, so that an open page
shows a write as soon as the page's own read could.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from bench.common import arguments, percentile  # noqa: E402
from bench.latency import draft, paced, source, start, wait_healthy  # noqa: E402
from bench.results import record  # noqa: E402
from services.log import ClaimLog, StreamSpec, connect  # noqa: E402
from services.log.names import notice_subject  # noqa: E402
from services.projector.notices import decode_notice  # noqa: E402
from services.runtime.compose import run  # noqa: E402
from services.runtime.db import make_engine, upgrade  # noqa: E402
from services.runtime.embedded import EmbeddedNats  # noqa: E402

console = Console()


def cpu_seconds(pid: int) -> float:
    """A process's CPU time so far (user and system), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def resident_mb(pid: int) -> float:
    """A process's resident memory, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


class Timings:
    """When each (claim, sequence) was committed (its notice heard), shown on its stream, and seen polled."""

    def __init__(self) -> None:
        self.noticed: dict[tuple[str, int], float] = {}
        self.streamed: dict[tuple[str, int], float] = {}
        self.polled: dict[tuple[str, int], float] = {}
        self.registry_messages = 0
        self.api_cpu = 0.0  # the API process's CPU seconds while the events were written and delivered

    def lags(self, seen: dict[tuple[str, int], float]) -> list[float]:
        return [(seen[key] - at) * 1000 for key, at in self.noticed.items() if key in seen]


async def claim_stream(http: httpx.AsyncClient, claim_id: str, timings: Timings, opened: asyncio.Event) -> None:
    async with http.stream("GET", f"/claims/{claim_id}/live") as response:
        opened.set()
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                data = json.loads(line[5:])
                timings.streamed.setdefault((claim_id, data["seq"]), time.perf_counter())


async def registry_stream(http: httpx.AsyncClient, timings: Timings, opened: asyncio.Event) -> None:
    async with http.stream("GET", "/live") as response:
        opened.set()
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                timings.registry_messages += 1


def poll_rows(db_path: Path, timings: Timings, stop: threading.Event) -> None:
    """The peer: the read model's rows polled for what changed (in a thread of its own, so the polling does
    not slow the streams' client)."""
    db = sqlite3.connect(db_path, isolation_level=None)
    seen = 0
    while not stop.is_set():
        for claim_id, last_seq in db.execute("SELECT claim_id, last_seq FROM claim_pages WHERE last_seq > ?", (seen,)):
            seen = max(seen, last_seq)
            timings.polled.setdefault((claim_id, last_seq), time.perf_counter())
        time.sleep(0.001)


async def measure(args: argparse.Namespace, url: str, api: str, api_pid: int, db_path: Path) -> tuple[Timings, float]:
    nc = await connect(url)
    claim_log = ClaimLog(nc, StreamSpec("CLAIMS"))
    await claim_log.ensure()
    heads = {}
    for n in range(args.streams):
        heads[f"CLM-{n:04d}"] = await claim_log.append(f"CLM-{n:04d}", [draft(n)], expected_seq=0, prev_hash=None)
    await asyncio.sleep(2)  # the drafts projected
    timings = Timings()

    async def noticed(msg) -> None:
        notice = decode_notice(msg.data)
        for claim_id, seq in (notice.claims if notice else {}).items():
            timings.noticed[(claim_id, seq)] = time.perf_counter()

    await nc.subscribe(notice_subject("CLAIMS"), cb=noticed)
    before = resident_mb(api_pid)
    limits = httpx.Limits(max_connections=args.streams + args.registry + 10, max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=api, timeout=None, limits=limits) as http:
        opened = [asyncio.Event() for _ in range(args.streams + args.registry)]
        tasks = [asyncio.create_task(claim_stream(http, f"CLM-{n:04d}", timings, opened[n])) for n in range(args.streams)]
        tasks += [asyncio.create_task(registry_stream(http, timings, opened[args.streams + n])) for n in range(args.registry)]
        await asyncio.wait_for(asyncio.gather(*(event.wait() for event in opened)), 120)
        await asyncio.sleep(1)
        per_stream_kb = (resident_mb(api_pid) - before) * 1024 / (args.streams + args.registry)
        stop = threading.Event()
        polling = threading.Thread(target=poll_rows, args=(db_path, timings, stop), daemon=True)
        polling.start()
        locks = {claim_id: asyncio.Lock() for claim_id in heads}

        async def write(i: int) -> None:
            claim_id = f"CLM-{i % args.streams:04d}"
            async with locks[claim_id]:
                head = heads[claim_id]
                heads[claim_id] = await claim_log.append(claim_id, [source(claim_id, i)], expected_seq=head.last_seq, prev_hash=head.last_hash)

        cpu = cpu_seconds(api_pid)
        await paced(args.rate, args.seconds, write)
        await asyncio.sleep(2)  # the last deliveries
        timings.api_cpu = cpu_seconds(api_pid) - cpu
        stop.set()
        polling.join()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    await nc.close()
    return timings, per_stream_kb


async def main(args: argparse.Namespace) -> None:
    args.load = os.getloadavg()[0]  # the machines are shared: the figures say how busy it was when the run began
    workdir = Path(tempfile.mkdtemp(prefix="claimlog-live-"))
    server = EmbeddedNats(workdir / "nats", sync=args.sync)
    url = server.start()
    db_path = workdir / "claimlog.sqlite3"
    database = f"sqlite:///{db_path}"
    upgrade(make_engine(database))
    env = {**os.environ, "CLAIMLOG_NATS_URL": url, "CLAIMLOG_DATABASE_URL": database, "CLAIMLOG_API_PORT": str(args.port),
           "CLAIMLOG_LIVE_STREAMS_PER_CLIENT": str(args.streams + args.registry)}
    api = f"http://127.0.0.1:{args.port}"
    services: list[subprocess.Popen[bytes]] = [start(["projector"], env), start(["api"], env)]
    try:
        await wait_healthy(api)
        timings, per_stream_kb = await measure(args, url, api, services[1].pid, db_path)
    finally:
        for service in services:
            service.terminate()
            service.wait()
        server.stop()
    report(timings, per_stream_kb, args)


def report(timings: Timings, per_stream_kb: float, args: argparse.Namespace) -> None:
    ours, peer = timings.lags(timings.streamed), timings.lags(timings.polled)
    table = Table(title=f"commit -> client, {args.streams} claim streams + {args.registry} registry streams, {args.rate:.0f} events/s")
    for column in ("path", "events", "p50 ms", "p90 ms", "p99 ms", "max ms"):
        table.add_column(column, justify="right" if column != "path" else "left")
    for name, values in (("claimlog: notice -> API -> claim stream message", ours), ("peer: the row polled from SQLite (1 ms)", peer)):
        table.add_row(name, str(len(values)), *(f"{percentile(values, p):.1f}" for p in (50, 90, 99)), f"{max(values):.1f}")
    console.print(table)
    missed = len(timings.noticed) - len(ours)
    console.print(f"committed {len(timings.noticed)}, delivered on their claim's stream {len(ours)} (missed {missed}); "
                  f"registry streams got {timings.registry_messages} messages (bursts merged)")
    console.print(f"memory per open stream: {per_stream_kb:.1f} KiB of the API process")
    console.print(f"API process CPU while writing and delivering: {timings.api_cpu:.2f} s "
                  f"({timings.api_cpu / args.seconds * 100:.0f}% of a core); load average {args.load:.1f} at the start")
    console.print(f"target: commit -> delivery p99 <= 50 ms -> {'met' if percentile(ours, 99) <= 50 else 'NOT met'}")
    busy = f"load average {args.load:.1f} at the start; API CPU {timings.api_cpu / args.seconds * 100:.0f}% of a core"
    record("live commit to delivery p99", percentile(ours, 99), unit="ms", peer=percentile(peer, 99), note=busy)
    record("live memory per open stream", per_stream_kb, unit="KiB")


if __name__ == "__main__":
    parser = arguments(__doc__)
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--registry", type=int, default=10)
    parser.add_argument("--rate", type=float, default=200)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--port", type=int, default=18766)
    run(main(parser.parse_args()))
