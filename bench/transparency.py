"""The transparency log's integrator on a backlog, against the raw cost of hashing the same entries.

    python bench/transparency.py [--events 20000] [--claims 2000]

Publishes a backlog, then times the integrator (read by direct gets, entries encoded, tiles and bundles
written to the object store, checkpoints signed and stored by compare-and-set) from an empty tree to
the head, and, in the same run, the raw cost of the same work without NATS: encoding the entries read
and growing the tree (``TreeBuilder``). Then, with the integrator running, appends at ``--rate`` events/s
for ``--seconds``: acknowledgement -> a stored signed checkpoint covering the event, p50 and p99
(target: p99 <= 1 s at 1,000 events/s). Target: catching up >= 20,000
entries/s; anchors: Trillian Tessera integrated ~1,600 entries/s on a 2-vCPU VM (POSIX storage).

Then a ``claimlog api`` process serves the tree: hash tiles, entry bundles and inclusion proofs at
``--serve-rate`` requests/s each (open loop, keep-alive connections), p50 and p99, beside its
``/health/live`` at the same rate in the same run (the peer: the process's floor for any answer).
With ``--audit``, ``claimlog audit --compare --sample N`` is run against it as an outsider runs it:
mirroring and verifying every entry, then replaying them all; events/s and the audit's peak memory.

    python bench/transparency.py --events 1000000 --claims 100000 --audit
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from bench.common import KeepAlive, arguments, peak_rss_mb, percentile, publish_backlog  # noqa: E402
from bench.latency import start, wait_healthy  # noqa: E402
from bench.read_api import measure_kind  # noqa: E402
from bench.results import record  # noqa: E402
from services.log import ClaimLog, StreamSpec, connect  # noqa: E402
from services.log.reader import ClaimReader  # noqa: E402
from services.log.tlog_store import TlogStore  # noqa: E402
from services.runtime.db import make_engine, upgrade  # noqa: E402
from services.runtime.embedded import EmbeddedNats  # noqa: E402
from services.runtime.from_settings import run  # noqa: E402
from services.tlog.integrator import Integrator, entry_of  # noqa: E402
from tlog.builder import TreeBuilder  # noqa: E402
from tlog.note import Ed25519Signer  # noqa: E402
from tlog.tiles import HEIGHT, WIDTH, Tile  # noqa: E402

console = Console()


async def integrate(claim_log: ClaimLog, head: int) -> float:
    store = await TlogStore.open(claim_log.nc, "CLAIMS")
    integrator = Integrator(claim_log.nc, store, Ed25519Signer.generate("bench.local/claims"), holder="bench")
    started = time.perf_counter()
    integrator.tree = await integrator.open_tree()
    async with ClaimReader(claim_log.nc, "CLAIMS") as reader:
        while integrator.tree.checkpoint.size < head:
            await integrator.round(reader)
    return head / (time.perf_counter() - started)


async def raw_hashing(claim_log: ClaimLog, head: int) -> float:
    """Encoding the entries and growing the tree in memory: what integrating costs without storage."""
    stored = []
    async with ClaimReader(claim_log.nc, "CLAIMS") as reader:
        while len(stored) < head:
            stored += await reader.read_log(after_seq=len(stored), limit=1000)
    started = time.perf_counter()
    builder = TreeBuilder()
    for message in stored:
        builder.append(entry_of(message))
    builder.root()
    return head / (time.perf_counter() - started)


async def latency(claim_log: ClaimLog, url: str, *, rate: int, seconds: float) -> list[float]:
    """Seconds from each append's acknowledgement to the first stored checkpoint that covers it."""
    import asyncio

    from services.tlog.tree import checkpoint_of
    from tests.builders.workload import claim_events

    nc = await connect(url)
    store = await TlogStore.open(nc, "CLAIMS")
    # The integrator in its own process, as `claimlog up` runs it: not sharing this process's loop with the appends.
    env = {**os.environ, "CLAIMLOG_NATS_URL": url, "CLAIMLOG_DATA_DIR": tempfile.mkdtemp(prefix="claimlog-bench-tlog-")}
    integrator = subprocess.Popen([sys.executable, "-m", "services.cli", "tlog", "integrate"], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    head = (await nc.jetstream().stream_info("CLAIMS")).state.last_seq
    while True:  # the backlog integrated first: the run measures a log that keeps up
        note, _ = await store.checkpoint()
        if note is not None and checkpoint_of(note, await store.tree()).size >= head:
            break
        await asyncio.sleep(0.05)
    acked: dict[int, float] = {}
    covered: list[float] = []

    async def one(number: int) -> None:
        events = claim_events(1_000_000 + number, 1, random.Random(number))
        appended = await claim_log.append(events[0].claim_id, events, expected_seq=0, prev_hash=None)
        acked[appended.last_seq] = time.perf_counter()

    async def publish() -> None:
        started, sent, tasks = time.perf_counter(), 0, []
        while time.perf_counter() - started < seconds:
            due = int((time.perf_counter() - started) * rate)
            tasks += [asyncio.create_task(one(n)) for n in range(sent, due)]
            sent = due
            await asyncio.sleep(0.002)
        await asyncio.gather(*tasks)

    async def watch(done: asyncio.Event) -> None:
        seen = 0
        while not done.is_set() or acked:
            note, _ = await store.checkpoint()
            if note is not None:
                size, now = checkpoint_of(note, await store.tree()).size, time.perf_counter()
                if size > seen:
                    for seq in [s for s in acked if s <= size]:
                        covered.append(now - acked.pop(seq))
                    seen = size
            await asyncio.sleep(0.005)

    done = asyncio.Event()
    watcher = asyncio.create_task(watch(done))
    await publish()
    done.set()
    await asyncio.wait_for(watcher, 120)
    integrator.terminate()
    integrator.wait(timeout=30)
    await nc.close()
    return sorted(covered)


def tile_paths(size: int) -> tuple[list[str], list[str]]:
    """Every hash tile and every entry bundle of the tree of ``size``, as ``/log/`` paths."""
    hashes, level = [], 0
    while size >> (HEIGHT * level):
        width = size >> (HEIGHT * level)
        hashes += [Tile(level, n).path() for n in range(width >> HEIGHT)]
        if width % WIDTH:
            hashes.append(Tile(level, width >> HEIGHT, width % WIDTH).path())
        level += 1
    bundles = [Tile(None, n).path() for n in range(size >> HEIGHT)]
    if size % WIDTH:
        bundles.append(Tile(None, size >> HEIGHT, size % WIDTH).path())
    return [f"/log/{p}" for p in hashes], [f"/log/{p}" for p in bundles]


async def serve_and_audit(url: str, workdir: Path, size: int, args) -> tuple[dict[str, tuple[list[float], int, float]], dict | None]:
    """Tiles, bundles and proofs from a ``claimlog api`` process at ``args.serve_rate`` each, beside its
    ``/health/live``; then, with ``args.audit``, ``claimlog audit --compare`` against it."""
    env = {**os.environ, "CLAIMLOG_NATS_URL": url, "CLAIMLOG_DATA_DIR": str(workdir / "api"),
           "CLAIMLOG_DATABASE_URL": f"sqlite:///{workdir / 'api.sqlite3'}", "CLAIMLOG_API_PORT": str(args.port)}
    base = f"http://127.0.0.1:{args.port}"
    upgrade(make_engine(env["CLAIMLOG_DATABASE_URL"]))  # the API serves on migrated read models (empty: /log/ needs none)
    api = start(["api"], env)
    results: dict[str, tuple[list[float], int, float]] = {}
    audited = None
    try:
        await wait_healthy(base)
        getter = KeepAlive(args.port)
        await getter.open()
        status, body = await getter.request("GET", "/log/checkpoint")
        assert status == 200 and int(body.split(b"\n")[1]) == size, (status, body[:200])
        hashes, bundles = tile_paths(size)
        rng = random.Random(5)
        kinds = {
            "hash tile": lambda i: rng.choice(hashes),
            "entry bundle": lambda i: rng.choice(bundles),
            "inclusion proof": lambda i: f"/log/proof/{rng.randrange(size)}",
            "peer: /health/live": lambda i: "/health/live",
        }
        await measure_kind(getter, kinds["hash tile"], args.serve_rate, 2)  # warm-up: connections, code paths
        for name, paths in kinds.items():
            results[name] = await measure_kind(getter, paths, args.serve_rate, args.serve_seconds)
        if args.audit:
            started, said = time.perf_counter(), workdir / "audit.err"
            with said.open("w") as sink:
                audit = subprocess.Popen(
                    [sys.executable, "-m", "services.cli", "audit", base, "--dir", str(workdir / "audit"), "--rate", "5000",
                     "--compare", "--sample", str(args.audit_sample)],
                    env={k: v for k, v in os.environ.items() if not k.startswith("CLAIMLOG_")}, stdout=subprocess.DEVNULL, stderr=sink,
                )
                _, status, usage = os.wait4(audit.pid, 0)  # this child's own peak memory, not the largest child's so far
            seconds = time.perf_counter() - started
            text = said.read_text()
            assert os.waitstatus_to_exitcode(status) == 0, text[-2000:]
            audited = {"seconds": seconds, "peak_mb": usage.ru_maxrss / 1024, "said": " ".join(text.split())[-300:]}
    finally:
        api.terminate()
        api.wait()
    return results, audited


async def main(args) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="claimlog-bench-"))
    server = EmbeddedNats(workdir / "nats", sync=args.sync)
    url = server.start()
    try:
        nc = await connect(url)
        claim_log = ClaimLog(nc, StreamSpec("CLAIMS"))
        await claim_log.ensure()
        head = await publish_backlog(claim_log, claims=args.claims, per_claim=args.events // args.claims)
        ours = await integrate(claim_log, head)
        raw = await raw_hashing(claim_log, head)
        served, audited = await serve_and_audit(url, workdir, head, args)
        await nc.jetstream().delete_key_value("claimlog_tlog")  # a fresh tree for the latency run, over the same stream
        await nc.jetstream().delete_object_store("claimlog_tiles")
        waits = await latency(claim_log, url, rate=args.rate, seconds=args.seconds)
        memory = peak_rss_mb()
        await nc.close()
    finally:
        server.stop()
    table = Table(title=f"transparency log backlog: {head:,} entries, nats sync_interval={args.sync}")
    table.add_column("what")
    table.add_column("entries/s", justify="right")
    table.add_row("integrator: read, encode, tiles + bundles to the object store, signed checkpoints", f"{ours:,.0f}")
    table.add_row("raw: encode the entries and grow the tree in memory (same run)", f"{raw:,.0f}")
    table.add_row("peak RSS of the benchmark process (MB)", f"{memory:,.0f}")
    console.print(table)
    p50, p99 = waits[len(waits) // 2], waits[int(len(waits) * 0.99)]
    console.print(f"ack -> covering checkpoint at {args.rate} events/s for {args.seconds} s: "
                  f"p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms over {len(waits)} events")
    record("transparency log: ack -> covering checkpoint p50", p50 * 1000, unit="ms", note=f"{args.rate} events/s, {len(waits)} events")
    record("transparency log: ack -> covering checkpoint p99", p99 * 1000, unit="ms", note=f"{args.rate} events/s, {len(waits)} events")
    record("transparency log integration from a backlog", ours, unit="entries/s", peer=raw,
           note="peer: encoding and hashing the same entries in memory")
    console.print(f"target: >= 20,000 entries/s -> {'met' if ours >= 20_000 else 'NOT met'}")
    serving = Table(title=f"/log/ served by one `claimlog api` process, {args.serve_rate:.0f} requests/s each, {head:,} entries")
    for column in ("request", "served /s", "p50 ms", "p99 ms", "max ms", "failed"):
        serving.add_column(column, justify="left" if column == "request" else "right")
    floor = percentile(served["peer: /health/live"][0], 99)
    for name, (latencies, failures, rate) in served.items():
        serving.add_row(name, f"{rate:.0f}", f"{percentile(latencies, 50):.1f}", f"{percentile(latencies, 99):.1f}",
                        f"{max(latencies):.1f}", str(failures))
        if not name.startswith("peer"):
            record(f"transparency log: {name} p99", percentile(latencies, 99), unit="ms", peer=floor,
                   note=f"{args.serve_rate:.0f} requests/s, {head} entries; peer: /health/live of the same process, same run")
    console.print(serving)
    if audited is not None:
        rate = head / audited["seconds"]
        console.print(f"claimlog audit --compare --sample {args.audit_sample}: {head:,} entries mirrored, verified and replayed in "
                      f"{audited['seconds']:.0f} s = {rate:,.0f} entries/s, peak {audited['peak_mb']:,.0f} MB; it said: {audited['said']}")
        record("transparency log: audit (mirror, verify, replay)", rate, unit="entries/s",
               note=f"{head} entries, --compare --sample {args.audit_sample}, peak {audited['peak_mb']:.0f} MB")


if __name__ == "__main__":
    parser = arguments(__doc__)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--claims", type=int, default=2_000)
    parser.add_argument("--rate", type=int, default=1_000, help="appends per second during the latency run")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long the latency run appends")
    parser.add_argument("--serve-rate", type=float, default=500, help="requests per second of each kind served from /log/")
    parser.add_argument("--serve-seconds", type=float, default=10.0, help="how long each kind is requested")
    parser.add_argument("--port", type=int, default=18768)
    parser.add_argument("--audit", action="store_true", help="also run `claimlog audit --compare` against the served log")
    parser.add_argument("--audit-sample", type=int, default=200, help="claims whose pages the audit compares")
    args = parser.parse_args()
    run(main(args))
