"""Live pages under load: one API process with 1,000 open claim streams and 10 registry streams, 200 events/s.

    python bench/live.py [--streams 1000] [--registry 10] [--rate 200] [--seconds 20]
    python bench/live.py --beside 0,100,1000 [--seconds 15]

With ``--beside``: what open registry streams (``GET /live``) cost the process's writers and readers. For
each count of open streams in turn, one writer sends commands through the command API one after another
(writes/s) while one reader reads a claim page one after another (page p99); the figures with streams
open are compared with those with none, in the same run. Target: with 1,000 open, writes/s at least 0.8x
and page p99 at most 1.5x of none open (CLAIMLOG_LIVE_STREAMS is sized to what a process sustains).

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
from events import Actor  # noqa: E402
from services.identity.actors import ActorStore  # noqa: E402
from services.log import ClaimLog, StreamSpec, connect  # noqa: E402
from services.log.names import notice_subject  # noqa: E402
from services.projector.notices import decode_notice  # noqa: E402
from services.runtime.db import make_engine, upgrade  # noqa: E402
from services.runtime.embedded import EmbeddedNats  # noqa: E402
from services.runtime.from_settings import run  # noqa: E402

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


async def beside_streams(args: argparse.Namespace, url: str, api: str) -> dict[int, tuple[float, float]]:
    """For each count of open registry streams: the writer's writes/s and the reader's page p99 (ms)."""
    nc = await connect(url)
    token, _ = await (await ActorStore.open(nc, create=True)).issue(Actor(id="bench-writer", kind="person"))
    await nc.close()
    headers = {"Authorization": f"Bearer {token}"}
    found: dict[int, tuple[float, float]] = {}
    async with httpx.AsyncClient(base_url=api, timeout=30) as client:
        claim = "CLM-0001"
        await client.post("/commands/draft_claim", headers=headers, json=draft_command(claim))
        for count in args.beside:
            # The streams are held by a process of their own on raw sockets: a client holding a thousand
            # streams in this process's loop (httpx costs about a millisecond a message) slowed the writer
            # and the reader measured here more than the API did.
            holder = subprocess.Popen([sys.executable, __file__, "--hold", str(count), "--port", str(args.port)],
                                      stdout=subprocess.PIPE, text=True)
            assert holder.stdout is not None and holder.stdout.readline().strip() == "open", "the streams did not open"
            found[count] = await writes_and_reads(client, headers, claim, args.seconds, tag=count)
            holder.terminate()
            holder.wait()
            await asyncio.sleep(6)  # the closed streams' places freed
    return found


async def writes_and_reads(client: httpx.AsyncClient, headers: dict, claim: str, seconds: float, *, tag: int) -> tuple[float, float]:
    deadline = time.monotonic() + seconds
    writes, pages = 0, []

    async def writer() -> None:
        nonlocal writes
        while time.monotonic() < deadline:
            body = {"claim_id": claim, "disagreement_id": f"d{tag}-{writes}", "argument": "Too few runs."}
            response = await client.post("/commands/file_disagreement", headers=headers, json=body)
            assert response.status_code == 201, response.text
            writes += 1

    async def reader() -> None:
        while time.monotonic() < deadline:
            started = time.perf_counter()
            assert (await client.get(f"/claims/{claim}")).status_code == 200
            pages.append((time.perf_counter() - started) * 1000)

    await asyncio.gather(writer(), reader())
    return writes / seconds, percentile(pages, 99)


async def hold_streams(count: int, port: int) -> None:
    """Open ``count`` registry streams on raw sockets, say "open", and read and drop what they send until killed."""

    async def one() -> asyncio.StreamReader:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /live HTTP/1.1\r\nHost: bench\r\nAccept: text/event-stream\r\n\r\n")
        status = await reader.readline()
        assert b" 200 " in status, status
        return reader

    readers = [await one() for _ in range(count)]
    print("open", flush=True)

    async def drain(reader: asyncio.StreamReader) -> None:
        while await reader.read(65536):
            pass

    await asyncio.gather(*(drain(reader) for reader in readers))


def draft_command(claim: str) -> dict:
    return {"claim_id": claim, "slug": "live-bench", "statement": "S.", "capability": "C", "observed_on": "O."}


async def main_beside(args: argparse.Namespace) -> None:
    args.load = os.getloadavg()[0]
    workdir = Path(tempfile.mkdtemp(prefix="claimlog-live-"))
    server = EmbeddedNats(workdir / "nats", sync=args.sync)
    url = server.start()
    database = f"sqlite:///{workdir / 'claimlog.sqlite3'}"
    upgrade(make_engine(database))
    env = {**os.environ, "CLAIMLOG_NATS_URL": url, "CLAIMLOG_DATABASE_URL": database, "CLAIMLOG_API_PORT": str(args.port),
           "CLAIMLOG_LIVE_STREAMS_PER_CLIENT": str(max(args.beside) + 1), "CLAIMLOG_RATE_LIMIT_PER_MINUTE": "0"}
    api = f"http://127.0.0.1:{args.port}"
    services = [start(["projector"], env), start(["api"], env)]
    try:
        await wait_healthy(api)
        found = await beside_streams(args, url, api)
    finally:
        for service in services:
            service.terminate()
            service.wait()
        server.stop()
    table = Table(title="one writer and one page reader beside open registry streams (GET /live)")
    for column in ("open streams", "writes/s", "x of none", "page p99 ms", "x of none"):
        table.add_column(column, justify="right")
    base_writes, base_p99 = found[args.beside[0]]
    for count, (writes, p99) in found.items():
        table.add_row(str(count), f"{writes:.0f}", f"{writes / base_writes:.2f}", f"{p99:.1f}", f"{p99 / base_p99:.2f}")
        busy = f"load average {args.load:.1f} at the start; peer: the same with {args.beside[0]} streams open"
        record(f"live writes/s beside {count} open streams", writes, unit="writes/s", peer=base_writes, note=busy)
        record(f"live page p99 beside {count} open streams", p99, unit="ms", peer=base_p99, note=busy)
    console.print(table)
    writes, p99 = found[max(args.beside)]
    met = writes >= 0.8 * base_writes and p99 <= 1.5 * base_p99
    console.print(f"target: with {max(args.beside)} open, writes/s >= 0.8x and page p99 <= 1.5x of none -> {'met' if met else 'NOT met'}")


if __name__ == "__main__":
    parser = arguments(__doc__)
    parser.add_argument("--beside", type=lambda text: [int(n) for n in text.split(",")], default=None,
                        help="Counts of open registry streams to write and read beside, e.g. 0,100,1000.")
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--registry", type=int, default=10)
    parser.add_argument("--rate", type=float, default=200)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--port", type=int, default=18766)
    parser.add_argument("--hold", type=int, default=None, help=argparse.SUPPRESS)  # the streams' own process (--beside)
    parsed = parser.parse_args()
    if parsed.hold is not None:
        run(hold_streams(parsed.hold, parsed.port))
    else:
        run(main_beside(parsed) if parsed.beside else main(parsed))
