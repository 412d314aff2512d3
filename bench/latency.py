"""Publish-to-visible latency on the embedded default: an event appended, then readable via GET /claims/{id}.

    python bench/latency.py [--rate 200] [--seconds 20]

Runs the real services as separate processes (`claimlog projector`, `claimlog api`) on an embedded
nats-server (sync_interval always) and SQLite. This process appends 200 events/s, watches the read
model with one polling task, then fetches each changed page through the API, and measures the time
from the start of each append until the API shows it. The peer in the
same run: plain nats-py publish -> push subscriber writing stdlib sqlite3 -> row polled with sqlite3.
Target: publish -> visible p99 under 20 ms at 200 events/s, so that nothing waits for a reviewer: a
write shows on its page before the writer can look. It also prints (and records) the projector's and
the API's CPU per event: the latencies move with the machine's other load, the CPU a process spends
on each event does not, so two commits are compared by it first.

    python bench/latency.py --partitions-ab 1 16

runs the same workload on two layouts in one run, each time on a fresh server and database: (A) a log
of the first number of partitions (CLAIMLOG_PARTITIONS; 0 is the unpartitioned layout, folded by the
one projector without leases), (B) a log of the second, each folded by one `claimlog projector`
worker; then the peer once. ``--rounds`` (3) repeats both in alternating order (A B, B A, A B) and
pools each layout's latencies, so that the machine's load drifting during the run weighs on both
alike. It prints both, the ratio B/A of p50 and p99, and the projector process's CPU per event in
each (what the layout costs it, which the machine's other load does not change). Target:
the partitioned log's p99 on one machine no worse than the unpartitioned one's. ``--claims`` spreads
the events over more claims (a page is rewritten whole at each event, so fewer claims make bigger
pages and dearer events).
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
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from bench.common import KeepAlive, arguments, percentile  # noqa: E402
from bench.partitions import server_cpu_seconds  # noqa: E402
from bench.results import record  # noqa: E402
from events import new_event_id  # noqa: E402
from events.claim import ClaimDrafted  # noqa: E402
from events.envelope import utc_now  # noqa: E402
from events.source import SourceAttached  # noqa: E402
from events.subjects import DEFAULT_PARTITIONS, LogLayout  # noqa: E402
from services.log import ClaimLog, StreamSpec, connect  # noqa: E402
from services.runtime.db import make_engine, upgrade  # noqa: E402
from services.runtime.embedded import EmbeddedNats  # noqa: E402
from services.runtime.from_settings import run  # noqa: E402
from tests.builders.workload import BOT, MODEL  # noqa: E402

console = Console()


def draft(n: int) -> ClaimDrafted:
    return ClaimDrafted(
        event_id=new_event_id(), claim_id=f"CLM-{n:04d}", occurred_at=utc_now(), actor=MODEL,
        slug=f"claim-{n}", statement=f"Statement {n}.", capability="Latency", observed_on="A benchmark.",
    )


def source(claim_id: str, n: int) -> SourceAttached:
    return SourceAttached(
        event_id=new_event_id(), claim_id=claim_id, occurred_at=utc_now(), actor=BOT,
        source_id=f"s{n}", relation="supports", measured=f"Measurement {n} of the latency benchmark.",
    )


async def paced(rate: float, seconds: float, measure) -> list:
    """Start one measurement every 1/rate seconds (open loop); return what they return."""
    tasks, start = [], time.perf_counter()
    for i in range(int(rate * seconds)):
        delay = start + i / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(measure(i)))
    return [ms for ms in await asyncio.gather(*tasks)]


class RowWatcher:
    """One task polls the read model for the pages someone waits for and wakes them.

    A poll per waiting event would load the machine in proportion to the latency it measures. The
    poll reads the waited-for claims' rows, not the rows above the highest sequence seen: the
    partitions of a partitioned log commit out of sequence order, so a page can become visible at a
    sequence below one already seen.
    """

    def __init__(self, db_path: Path) -> None:
        self._db = sqlite3.connect(db_path, isolation_level=None)
        self._waiting: dict[str, list[tuple[int, asyncio.Future[None]]]] = {}

    def wait(self, claim_id: str, seq: int) -> asyncio.Future[None]:
        future = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(claim_id, []).append((seq, future))
        return future

    async def run(self) -> None:
        while True:
            if self._waiting:
                claims = list(self._waiting)
                marks = ",".join("?" * len(claims))
                for claim_id, last_seq in self._db.execute(f"SELECT claim_id, last_seq FROM claim_pages WHERE claim_id IN ({marks})", claims):
                    still = []
                    for seq, future in self._waiting.pop(claim_id, []):
                        (future.set_result(None) if seq <= last_seq else still.append((seq, future)))
                    if still:
                        self._waiting[claim_id] = still
            await asyncio.sleep(0.0005)


async def claimlog_latency(
    claim_log: ClaimLog, port: int, db_path: Path, args: argparse.Namespace, stages: dict[str, list[float]]
) -> list[float]:
    claims, rate, seconds = args.claims, args.rate, args.seconds
    heads = {}
    for n in range(claims):
        heads[f"CLM-{n:04d}"] = await claim_log.append(f"CLM-{n:04d}", [draft(n)], expected_seq=0, prev_hash=None)
    locks = {claim_id: asyncio.Lock() for claim_id in heads}
    await asyncio.sleep(2)  # let the projector apply the drafts
    watcher = RowWatcher(db_path)
    watching = asyncio.create_task(watcher.run())
    pages = KeepAlive(port, connections=8)
    await pages.open()

    async def measure(i: int) -> float:
        claim_id = f"CLM-{i % claims:04d}"
        async with locks[claim_id]:
            started = time.perf_counter()
            head = heads[claim_id]
            head = await claim_log.append(claim_id, [source(claim_id, i)], expected_seq=head.last_seq, prev_hash=head.last_hash)
            appended = time.perf_counter()
            heads[claim_id] = head
            await watcher.wait(claim_id, head.last_seq)
            visible = time.perf_counter()
            page = json.loads((await pages.request("GET", f"/claims/{claim_id}"))[1])
            assert page["as_of_seq"] >= head.last_seq, "the API served an older page than the database holds"
            done = time.perf_counter()
            stages["append (acknowledged)"].append((appended - started) * 1000)
            stages["projector (row committed)"].append((visible - appended) * 1000)
            stages["GET /claims/{id}"].append((done - visible) * 1000)
            return (done - started) * 1000

    latencies = await paced(rate, seconds, measure)
    watching.cancel()
    return latencies


async def peer_latency(nats_url: str, path: Path, args: argparse.Namespace) -> list[float]:
    claims, rate, seconds = args.claims, args.rate, args.seconds
    import nats

    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    await js.add_stream(name="PEER", subjects=["peer.>"])
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("CREATE TABLE seen (claim_id TEXT PRIMARY KEY, seq INTEGER)")
    reader = sqlite3.connect(path, isolation_level=None)

    async def apply(msg) -> None:
        writer.execute("INSERT OR REPLACE INTO seen VALUES (?, ?)", (msg.subject, msg.metadata.sequence.stream))

    sub = await js.subscribe("peer.>", cb=apply, ordered_consumer=True)

    async def measure(i: int) -> float:
        started = time.perf_counter()
        subject = f"peer.c{i % claims}"
        ack = await js.publish(subject, source("CLM-0000", i).model_dump_json().encode(), headers={"Nats-Msg-Id": str(i)})
        while (reader.execute("SELECT seq FROM seen WHERE claim_id = ?", (subject,)).fetchone() or (0,))[0] < ack.seq:
            await asyncio.sleep(0.0005)
        return (time.perf_counter() - started) * 1000

    latencies = await paced(rate, seconds, measure)
    await sub.unsubscribe()
    await nc.close()
    return latencies


def start(args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    with open(os.environ.get("LATENCY_LOG", os.devnull), "ab") as err:
        return subprocess.Popen([sys.executable, "-m", "services.cli", *args], env=env, stderr=err)


async def wait_healthy(api: str) -> None:
    async with httpx.AsyncClient(timeout=1) as client:
        for _ in range(200):
            try:
                if (await client.get(f"{api}/health")).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.1)
    raise RuntimeError("the read API did not start")


async def measure(args: argparse.Namespace, partitions: int | None, *, peer: bool) -> tuple[list[float], dict[str, list[float]], list[float], dict[str, float]]:
    """One run of the workload on a fresh server and database: the log of ``partitions`` (None: the
    default), folded by one `claimlog projector`; then, when ``peer``, the peer on the same server."""
    workdir = Path(tempfile.mkdtemp(prefix="claimlog-latency-"))
    server = EmbeddedNats(workdir / "nats", sync=args.sync)
    url = server.start()
    database = f"sqlite:///{workdir / 'claimlog.sqlite3'}"
    upgrade(make_engine(database))
    env = {**os.environ, "CLAIMLOG_NATS_URL": url, "CLAIMLOG_DATABASE_URL": database, "CLAIMLOG_API_PORT": str(args.port)}
    layout = LogLayout(partitions=DEFAULT_PARTITIONS if partitions is None else partitions)
    env["CLAIMLOG_PARTITIONS"] = str(layout.partitions)
    api = f"http://127.0.0.1:{args.port}"
    services = [start(["projector"], env), start(["api"], env)]
    ours, theirs, stages = [], [], defaultdict(list)
    try:
        await wait_healthy(api)
        nc = await connect(url)
        claim_log = ClaimLog(nc, StreamSpec("CLAIMS", layout=layout))
        await claim_log.ensure()
        cpu_before = [server_cpu_seconds(service.pid) for service in services]
        ours = await claimlog_latency(claim_log, args.port, workdir / "claimlog.sqlite3", args, stages)
        # The projector's and the API's CPU per event (µs): what the code costs, whatever else loads the machine.
        cpu = {name: (server_cpu_seconds(service.pid) - before) / len(ours) * 1e6
               for name, service, before in zip(("projector", "API"), services, cpu_before, strict=True)}
        await nc.close()
        if peer:
            theirs = await peer_latency(url, workdir / "peer.sqlite3", args)
    finally:
        for service in services:
            service.terminate()
            service.wait()
        server.stop()
    return ours, stages, theirs, cpu


async def main(args: argparse.Namespace) -> None:
    if args.partitions_ab is None:
        ours, stages, peer, cpu = await measure(args, None, peer=True)
        report(ours, peer, stages, cpu, args)
        return
    a, b = args.partitions_ab
    # Rounds alternate the order (A B, B A, A B, ...) so that neither layout always runs first, and
    # pool each layout's latencies: the machine's load drifting during the run then weighs on both.
    pooled: dict[int, tuple[list[float], dict[str, list[float]], list[float]]] = {a: ([], defaultdict(list), []), b: ([], defaultdict(list), [])}
    peer: list[float] = []
    for round_ in range(args.rounds):
        order = (a, b) if round_ % 2 == 0 else (b, a)
        for i, partitions in enumerate(order):
            last = round_ == args.rounds - 1 and i == 1
            ours, stages, theirs, cpu = await measure(args, partitions, peer=last)
            latencies, pooled_stages, cpus = pooled[partitions]
            latencies.extend(ours)
            for stage, times in stages.items():
                pooled_stages[stage].extend(times)
            cpus.append(cpu["projector"])
            peer.extend(theirs)
            console.print(f"round {round_ + 1}/{args.rounds}, {_layout_name(partitions)}: p50 {percentile(ours, 50):.1f} ms, "
                          f"p99 {percentile(ours, 99):.1f} ms, projector CPU per event {cpu['projector']:.0f} µs")
    report_ab(*((k, pooled[k][0], pooled[k][1], sum(pooled[k][2]) / len(pooled[k][2])) for k in (a, b)), peer, args)


def report(ours: list[float], peer: list[float], stages: dict[str, list[float]], cpu: dict[str, float], args: argparse.Namespace) -> None:
    table = Table(title=f"publish -> visible, {args.rate:.0f} events/s for {args.seconds:.0f} s, nats sync_interval={args.sync}")
    for column in ("path", "events", "p50 ms", "p90 ms", "p99 ms", "max ms"):
        table.add_column(column, justify="right" if column != "path" else "left")
    rows = [("claimlog: append -> projector -> GET /claims/{id}", ours)]
    rows += [(f"  of which {stage}", values) for stage, values in stages.items()]
    rows += [("peer: js.publish -> push sub -> sqlite3 row", peer)]
    for name, values in rows:
        table.add_row(name, str(len(values)), *(f"{percentile(values, p):.1f}" for p in (50, 90, 99)), f"{max(values):.1f}")
    console.print(table)
    console.print(", ".join(f"{name} CPU per event {value:.0f} µs" for name, value in cpu.items()))
    console.print(f"target: p99 < 20 ms -> {'met' if percentile(ours, 99) < 20 else 'NOT met'}")
    for p in (50, 99):
        record(f"publish to visible p{p}", percentile(ours, p), unit="ms", peer=percentile(peer, p))
    for name, value in cpu.items():  # the figures the machine's other load does not change
        record(f"{name} CPU per event", value, unit="µs")


def _layout_name(partitions: int) -> str:
    return "unpartitioned" if partitions == 0 else f"{partitions} partition{'s' if partitions != 1 else ''}"


def report_ab(first: tuple[int, list[float], dict, float], second: tuple[int, list[float], dict, float], peer: list[float], args: argparse.Namespace) -> None:
    """Both layouts' latencies, the ratio of the second's to the first's, and the peer."""
    load = os.getloadavg()[0]
    table = Table(title=f"publish -> visible by partitions, one worker, {args.rate:.0f} events/s for {args.rounds} x {args.seconds:.0f} s each, "
                        f"nats sync_interval={args.sync}, load average {load:.1f}")
    for column in ("path", "events", "p50 ms", "p90 ms", "p99 ms", "max ms"):
        table.add_column(column, justify="right" if column != "path" else "left")
    for partitions, values, stages, _ in (first, second):
        table.add_row(f"claimlog, {_layout_name(partitions)}: append -> projector -> GET /claims/{{id}}", str(len(values)),
                      *(f"{percentile(values, p):.1f}" for p in (50, 90, 99)), f"{max(values):.1f}")
        for stage, times in stages.items():
            table.add_row(f"  of which {stage}", str(len(times)), *(f"{percentile(times, p):.1f}" for p in (50, 90, 99)), f"{max(times):.1f}")
    table.add_row("peer: js.publish -> push sub -> sqlite3 row", str(len(peer)), *(f"{percentile(peer, p):.1f}" for p in (50, 90, 99)),
                  f"{max(peer):.1f}")
    console.print(table)
    (a, ours_a, _, cpu_a), (b, ours_b, _, cpu_b) = first, second
    for p in (50, 99):
        ratio = percentile(ours_b, p) / percentile(ours_a, p)
        console.print(f"p{p}: {_layout_name(b)} / {_layout_name(a)} = {ratio:.2f}x")
    console.print(f"projector CPU per event: {_layout_name(a)} {cpu_a:.0f} µs, {_layout_name(b)} {cpu_b:.0f} µs = {cpu_b / cpu_a:.2f}x")
    verdict = "met" if percentile(ours_b, 99) <= percentile(ours_a, 99) else "NOT met"
    console.print(f"target: p99 of {_layout_name(b)} no worse than of {_layout_name(a)} -> {verdict} (the two runs differ by the machine's noise too)")
    note = (f"one `claimlog projector` worker, {args.rate:g} events/s, {args.rounds} rounds of {args.seconds:g} s per layout in alternating order, "
            f"load average {load:.1f}")
    for p in (50, 99):
        record(f"publish to visible p{p}, {_layout_name(a)}", percentile(ours_a, p), unit="ms", peer=percentile(peer, p),
               note=note + "; peer: plain nats-py and sqlite3, same run")
        record(f"publish to visible p{p}, {_layout_name(b)}", percentile(ours_b, p), unit="ms", peer=percentile(ours_a, p),
               note=note + f"; peer: the same workload on a log of {_layout_name(a)}, same run")
    record(f"projector CPU per event, {_layout_name(b)}", cpu_b, unit="µs", peer=cpu_a,
           note=note + f"; peer: the same workload on a log of {_layout_name(a)}, same run")


if __name__ == "__main__":
    parser = arguments(__doc__)
    parser.add_argument("--rate", type=float, default=200)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--claims", type=int, default=50, help="claims the events are spread over (a page's size grows with its events)")
    parser.add_argument("--port", type=int, default=18765)
    parser.add_argument("--partitions-ab", type=int, nargs=2, metavar=("A", "B"),
                        help="run the workload on a log of A partitions, then of B (e.g. 1 16; 0: unpartitioned), one worker each")
    parser.add_argument("--rounds", type=int, default=3,
                        help="with --partitions-ab: rounds of both layouts, in alternating order, each layout's latencies pooled")
    run(main(parser.parse_args()))  # uvloop and claimlog's GC settings, for claimlog and the peer alike
