"""The projector's fold alone: the backlog benchmark's events through the real projector, fed from memory.

    python bench/fold.py [--events 100000] [--claims 10000] [--batch 1000] [--no-peer] [--signed]

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
import random
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from bench.common import PeerCounts  # noqa: E402
from bench.results import record  # noqa: E402
from projections.registry import build_projections  # noqa: E402
from services.auditor.replay import EntryLog  # noqa: E402 - the auditor's in-memory source of deliveries
from services.log import Delivery  # noqa: E402
from services.log.chain import chain  # noqa: E402
from services.log.signing import Attribution, Signer, SigningKey  # noqa: E402
from services.projector import Projector  # noqa: E402
from services.runtime.db import make_engine, upgrade  # noqa: E402
from services.runtime.from_settings import run  # noqa: E402
from tests.builders.workload import claim_events  # noqa: E402

console = Console()


def deliveries(events: int, claims: int, seed: int = 1, *, signer: Signer | None = None) -> list[Delivery]:
    """The backlog benchmark's log (each claim's events together), as the consumer delivers it; with
    ``signer``, each event signed on its own, as the command API signs one command's event."""
    rng, stored_ns, out = random.Random(seed), time.time_ns(), []
    for number in range(claims):
        for event, data in chain(claim_events(number, events // claims, rng), None):  # linked as a pipeline links them
            seq = len(out) + 1
            headers = signer.headers([data])[0] if signer is not None else None
            out.append(Delivery(seq, stored_ns + seq * 1000, f"claims.{event.claim_id}.{event.type}", data, "", headers))
    return out


def delegate_attribution(signer: Signer | None) -> Attribution:
    """The key registry of the log: none, or ``signer`` as the API's delegate key, required from the first event."""
    if signer is None:
        return Attribution({}, None)  # a log with no signing keys: unsigned events are attributable
    key = SigningKey(signer.key_id, "claimlog-api", signer.public_key, True, datetime.now(UTC))
    return Attribution({signer.key_id: key}, 0)


async def claimlog_fold(log: list[Delivery], database_url: str, batch: int, attribution: Attribution | None = None) -> tuple[float, float]:
    """Events/s and CPU µs per event of the projector folding ``log`` into a migrated database."""
    engine = make_engine(database_url)
    upgrade(engine)
    projector = Projector(EntryLog(log, attribution or Attribution({}, None)), engine, build_projections(), name="bench", batch=batch)
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
    signer = Signer.generate() if args.signed else None
    log = deliveries(args.events, args.claims, signer=signer)
    workdir = Path(tempfile.mkdtemp(prefix="claimlog-bench-fold-"))
    if args.setup_only:
        upgrade(make_engine(f"sqlite:///{workdir / 'claimlog.sqlite3'}"))
        return
    rate, cpu = await claimlog_fold(log, f"sqlite:///{workdir / 'claimlog.sqlite3'}", args.batch, delegate_attribution(signer))
    peer = None if args.no_peer else peer_fold(log, workdir / "peer.sqlite3", args.batch)
    signed = ", each event signed" if args.signed else ""
    table = Table(title=f"the fold alone, from memory: {len(log):,} events{signed}, {args.claims:,} claims, batches of {args.batch:,}, sqlite")
    table.add_column("what")
    table.add_column("events/s", justify="right")
    table.add_column("CPU µs/event", justify="right")
    table.add_row("claimlog projector (decode, fold, write, commit)", f"{rate:,.0f}", f"{cpu:.1f}")
    if peer is not None:
        table.add_row("peer: json.loads + sqlite3 counts upsert", f"{peer[0]:,.0f}", f"{peer[1]:.1f}")
        table.add_row("ratio claimlog / peer", f"{rate / peer[0]:.2f}", "")
    console.print(table)
    suffix = ", signed" if args.signed else ""
    record(f"fold from memory{suffix}", rate, unit="events/s", peer=peer[0] if peer else None)
    record(f"fold CPU per event{suffix}", cpu, unit="µs", peer=peer[1] if peer else None)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--claims", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--no-peer", action="store_true")
    parser.add_argument("--setup-only", action="store_true", help="build the workload and the schema only (an instruction count's baseline)")
    parser.add_argument("--signed", action="store_true", help="each event signed by the API's delegate key, signatures required from the first")
    run(main(parser.parse_args()))
