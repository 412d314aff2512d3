"""The projector's fold alone: the backlog benchmark's events through the real projector, fed from memory.

    python bench/fold.py [--events 100000] [--claims 10000] [--batch 1000] [--no-peer]

``bench/backlog.py`` measures the projector on a real log, where nats-server and the machine's noise
move the figure by more than most changes to the fold. Here the same events (the same workload, stored
bytes and store times as a delivery carries them) reach the same ``Projector`` from memory, one batch
per turn of the event loop as a consumer hands them over, so what is measured is decoding, folding,
writing and committing. Prints events/s and CPU per event; the peer is the backlog's (count per claim,
a sqlite3 upsert and a checkpoint per batch), also from memory.

For a small change, count instructions instead of seconds (the count does not depend on the hour):

    valgrind --tool=callgrind --callgrind-out-file=/dev/null python bench/fold.py --events 20000 --claims 2000 --no-peer

and subtract the count of the same run with ``--setup-only`` (the workload and the schema, no fold).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from bench.common import PeerCounts  # noqa: E402
from bench.results import record  # noqa: E402
from bench.workload import claim_events  # noqa: E402
from projections.registry import build_projections  # noqa: E402
from services.log import Delivery  # noqa: E402
from services.log.chain import chain  # noqa: E402
from services.log.signing import Attribution  # noqa: E402
from services.projector import Projector  # noqa: E402
from services.runtime.compose import run  # noqa: E402
from services.runtime.db import make_engine, upgrade  # noqa: E402

console = Console()


def deliveries(events: int, claims: int, seed: int = 1) -> list[Delivery]:
    """The backlog benchmark's log (each claim's events together), as the consumer delivers it."""
    rng, stored_ns, out = random.Random(seed), time.time_ns(), []
    for number in range(claims):
        for event, data in chain(claim_events(number, events // claims, rng), None):  # linked as a pipeline links them
            seq = len(out) + 1
            out.append(Delivery(seq, stored_ns + seq * 1000, f"claims.{event.claim_id}.{event.type}", data, ""))
    return out


class MemoryLog:
    """What the projector reads from: the deliveries, a batch per call, after a turn of the event loop
    (a real consumer waits for its queue there, which is when the previous batch's commit overlaps)."""

    def __init__(self, log: list[Delivery]) -> None:
        self._log, self._at, self._batch = log, 0, 1000
        self.attribution = Attribution({}, None)  # a log with no signing keys: unsigned events are attributable

    def consumer(self, name: str, *, max_batch: int, partitions: Sequence[int] | None = None) -> MemoryLog:
        self._batch = max_batch  # one runner over the whole log: no partition to filter by
        return self

    async def start(self, after_seq: int) -> None:
        self._at = after_seq

    async def stop(self) -> None:
        pass

    async def next_batch(self, **_options) -> list[Delivery]:
        await asyncio.sleep(0)
        batch = self._log[self._at : self._at + self._batch]
        self._at += len(batch)
        if not batch:
            await asyncio.sleep(0.005)
        return batch

    async def ack_through(self, delivery: Delivery) -> None:
        pass

    async def ack_batch(self, batch: Sequence[Delivery]) -> None:
        pass


async def claimlog_fold(log: list[Delivery], database_url: str, batch: int) -> tuple[float, float]:
    """Events/s and CPU µs per event of the projector folding ``log`` into a migrated database."""
    engine = make_engine(database_url)
    upgrade(engine)
    projector = Projector(MemoryLog(log), engine, build_projections(), name="bench", batch=batch)
    cpu, started = time.process_time(), time.perf_counter()
    await projector.run_until(len(log), timeout=3600)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    engine.dispose()
    return len(log) / elapsed, cpu / len(log) * 1e6


def peer_fold(log: list[Delivery], path: Path, batch: int) -> tuple[float, float]:
    """The backlog's peer from memory: json.loads, a count per claim, a sqlite3 upsert and a checkpoint per batch."""
    peer = PeerCounts(path)
    cpu, started = time.process_time(), time.perf_counter()
    for start in range(0, len(log), batch):
        chunk = log[start : start + batch]
        peer.apply((delivery.data for delivery in chunk), chunk[-1].seq)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    peer.close()
    return len(log) / elapsed, cpu / len(log) * 1e6


async def main(args: argparse.Namespace) -> None:
    log = deliveries(args.events, args.claims)
    workdir = Path(tempfile.mkdtemp(prefix="claimlog-bench-fold-"))
    if args.setup_only:
        upgrade(make_engine(f"sqlite:///{workdir / 'claimlog.sqlite3'}"))
        return
    rate, cpu = await claimlog_fold(log, f"sqlite:///{workdir / 'claimlog.sqlite3'}", args.batch)
    peer = None if args.no_peer else peer_fold(log, workdir / "peer.sqlite3", args.batch)
    table = Table(title=f"the fold alone, from memory: {len(log):,} events, {args.claims:,} claims, batches of {args.batch:,}, sqlite")
    table.add_column("what")
    table.add_column("events/s", justify="right")
    table.add_column("CPU µs/event", justify="right")
    table.add_row("claimlog projector (decode, fold, write, commit)", f"{rate:,.0f}", f"{cpu:.1f}")
    if peer is not None:
        table.add_row("peer: json.loads + sqlite3 counts upsert", f"{peer[0]:,.0f}", f"{peer[1]:.1f}")
        table.add_row("ratio claimlog / peer", f"{rate / peer[0]:.2f}", "")
    console.print(table)
    record("fold from memory", rate, unit="events/s", peer=peer[0] if peer else None)
    record("fold CPU per event", cpu, unit="µs", peer=peer[1] if peer else None)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--claims", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--no-peer", action="store_true")
    parser.add_argument("--setup-only", action="store_true", help="build the workload and the schema only (an instruction count's baseline)")
    run(main(parser.parse_args()))
