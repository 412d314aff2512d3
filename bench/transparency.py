"""The transparency log's integrator on a backlog, against the raw cost of hashing the same entries.

    python bench/transparency.py [--events 20000] [--claims 2000]

Publishes a backlog, then times the integrator (read by direct gets, entries encoded, tiles and bundles
written to the object store, checkpoints signed and stored by compare-and-set) from an empty tree to
the head, and, in the same run, the raw cost of the same work without NATS: encoding the entries read
and growing the tree (``TreeBuilder``). Then, with the integrator running, appends at ``--rate`` events/s
for ``--seconds``: acknowledgement -> a stored signed checkpoint covering the event, p50 and p99
(target: p99 <= 1 s at 1,000 events/s). Target: catching up >= 20,000
entries/s; anchors: Trillian Tessera integrated ~1,600 entries/s on a 2-vCPU VM (POSIX storage).
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

from bench.common import arguments, peak_rss_mb, publish_backlog  # noqa: E402
from bench.results import record  # noqa: E402
from services.log import ClaimLog, StreamSpec, connect  # noqa: E402
from services.log.reader import ClaimReader  # noqa: E402
from services.log.tlog_store import TlogStore  # noqa: E402
from services.runtime.embedded import EmbeddedNats  # noqa: E402
from services.runtime.from_settings import run  # noqa: E402
from services.tlog.integrator import Integrator, entry_of  # noqa: E402
from tlog.builder import TreeBuilder  # noqa: E402
from tlog.note import Ed25519Signer  # noqa: E402

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


if __name__ == "__main__":
    parser = arguments(__doc__)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--claims", type=int, default=2_000)
    parser.add_argument("--rate", type=int, default=1_000, help="appends per second during the latency run")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long the latency run appends")
    args = parser.parse_args()
    run(main(args))
