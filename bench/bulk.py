"""Bulk ingestion of JSON Lines commands: events acknowledged per second from one process.

    python bench/bulk.py [--claims 10000] [--per-claim 10] [--sync always|2m] [--window 512]

Writes a file of claims x per-claim commands, then times claimlog's bulk path (validate every line,
read each claim, decide, append with the message id and the per-claim expected sequence, a window
of acks in flight) next to a peer on the same server: raw nats-py publishing of pre-encoded events
with the same two headers and the same window, no validation and no decisions. Then it runs the file
again (everything already present). Target: 15,000 events/s or more acknowledged (with
--sync 2m), so that validating and deciding every line costs a bulk load little beyond what the log
itself takes.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from bench.common import arguments, peak_rss_mb, progress  # noqa: E402
from bench.results import record  # noqa: E402
from bench.workload import write_commands  # noqa: E402
from events import Actor  # noqa: E402
from services.commands.bulk import BulkIngest  # noqa: E402
from services.commands.bulk_lines import read_commands  # noqa: E402
from services.embedded import EmbeddedNats  # noqa: E402
from services.ingest.cli import throttled_advance  # noqa: E402
from services.log import ClaimLog, StreamSpec, connect  # noqa: E402
from services.runtime import run  # noqa: E402

console = Console()
ACTOR = Actor(id="ingest-bot", kind="model", model="pipeline-2")


async def claimlog_bulk(url: str, path: Path, window: int, label: str) -> tuple[float, float, int]:
    nc = await connect(url)
    log = ClaimLog(nc, StreamSpec("CLAIMS"))
    await log.ensure()
    started = time.perf_counter()
    lines, errors = read_commands(path, ACTOR)
    with progress() as bar:
        task = bar.add_task(label, total=len(lines), rate="")
        advance = throttled_advance(bar, task, "commands")
        report = await BulkIngest(log, ACTOR, window=window, on_line=advance).run(lines)
    elapsed = time.perf_counter() - started
    await nc.drain()
    assert not errors and not report.rejected, (errors[:3], report.rejected[:3])
    done = report.accepted or report.present
    return done / elapsed, elapsed, report.accepted


async def peer(url: str, path: Path, window: int) -> tuple[float, float]:
    """Raw pipelined publishing with Nats-Msg-Id and the per-claim expected sequence, chained per claim."""
    import uuid

    from events.subjects import claim_filter

    nc = await connect(url)
    js = nc.jetstream()
    await js.add_stream(name="PEER", subjects=["peer.>"])
    by_claim: dict[str, list[bytes]] = {}
    for raw in path.read_bytes().splitlines():
        claim_id = json.loads(raw)["claim_id"]
        by_claim.setdefault(claim_id, []).append(raw)
    slots = asyncio.Semaphore(window)

    async def one_claim(claim_id: str, items: list[bytes]) -> None:
        seq = 0
        for data in items:
            async with slots:
                headers = {
                    "Nats-Msg-Id": str(uuid.uuid4()),
                    "Nats-Expected-Last-Subject-Sequence": str(seq),
                    "Nats-Expected-Last-Subject-Sequence-Subject": "peer." + claim_filter(claim_id),
                }
                ack = await js.publish(f"peer.claims.{claim_id}.Event", data, headers=headers)
                seq = ack.seq

    claims = iter(by_claim.items())

    async def worker() -> None:
        for claim_id, items in claims:
            await one_claim(claim_id, items)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(window)))
    elapsed = time.perf_counter() - started
    await nc.drain()
    return sum(map(len, by_claim.values())) / elapsed, elapsed


async def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--claims", type=int, default=10_000)
    parser.add_argument("--per-claim", type=int, default=10)
    parser.add_argument("--window", type=int, default=512)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "commands.jsonl"
        lines = write_commands(path, claims=options.claims, per_claim=options.per_claim)
        with EmbeddedNats(Path(tmp) / "nats", sync=options.sync) as server:
            url = server.url_for("admin") if hasattr(server, "url_for") else server.url
            from services.actors import ActorStore

            nc = await connect(url)
            await ActorStore.open(nc, create=True)
            await nc.close()
            ours, ours_s, accepted = await claimlog_bulk(url, path, options.window, "claimlog ingest")
            again, again_s, _ = await claimlog_bulk(url, path, options.window, "again (all present)")
            theirs, theirs_s = await peer(url, path, options.window)
    table = Table(title=f"Bulk ingestion: {lines:,} commands over {options.claims:,} claims, sync {options.sync}, window {options.window}")
    for column in ("", "events/s", "seconds", "vs peer"):
        table.add_column(column, justify="right" if column else "left")
    table.add_row("claimlog ingest (validate, decide, append)", f"{ours:,.0f}", f"{ours_s:.1f}", f"{ours / theirs:.2f}")
    table.add_row("same file again (nothing new)", f"{again:,.0f}", f"{again_s:.1f}", "")
    table.add_row("peer: raw nats-py, same headers, same window", f"{theirs:,.0f}", f"{theirs_s:.1f}", "1.00")
    console.print(table)
    console.print(f"accepted {accepted:,} events; peak memory {peak_rss_mb():.0f} MB; target 15,000 events/s")
    record("ingest", ours, unit="events/s", peer=theirs)
    record("same file again", again, unit="lines/s")


if __name__ == "__main__":
    run(main())
