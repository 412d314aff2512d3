"""Bulk ingestion of JSON Lines commands: events acknowledged per second from one process, durable.

    python bench/bulk.py [--claims 10000] [--per-claim 10] [--sync always|2m] [--cluster 3] [--signed] [--no-pipelined-peer] [--no-batch-peer] [--plain-peer] [--no-cli] [--no-again] [--rounds 3]

Writes a file of claims x per-claim commands and times, on one server:
- claimlog's bulk path in this process (stream the lines, validate, decide against each claim's state,
  append in atomic batches over many claims with message ids and per-claim expected sequences);
- the same file again (everything already present);
- its peer: raw atomic batches of the same file's lines, 1,000 events each, with the same headers, into
  a stream laid out as claimlog's (the subject transform storing each claim in its partition; with
  ``--plain-peer`` also into a stream without one, on a fresh server)
  (``Nats-Msg-Id`` on each event, the expected last sequence on each claim's first event in a batch),
  no validation and no decisions, one batch in flight;
- the earlier peer: raw pipelined single appends with the same headers, a window of 512;
- with ``--rounds N``, the bulk path and the atomic-batch peer N times each, each into a fresh server,
  which goes first alternating round by round, the figures pooled (the machines are shared and their
  speed drifts within a run: one pair of runs can put the ratio anywhere in a tenth either way);
- ``claimlog ingest`` of the file as a command, end to end (start-up included), into a fresh server,
  with its peak memory;
- with ``--signed``, the bulk path again into a fresh server, every batch signed as the API signs an
  append (one Ed25519 signature over the Merkle root of its events' hashes): what signing costs.
With ``--cluster 3`` every server is a local cluster of three nodes (services/runtime/cluster.py, TLS to
clients) and every stream, the peers' too, keeps three copies.
Targets with ``--sync always``: 20,000 events/s or more acknowledged and 0.8 of the atomic-batch peer
or more (deciding every line must cost a durable bulk load little beyond what the log itself takes);
``claimlog ingest`` of 400,000 commands at 15,000 events/s or more end to end; its peak memory the
same within 10% for 100,000 and 1,000,000 lines (it is bounded by the claims in flight, not the file).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nats.js.api import StreamConfig, SubjectTransform  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from bench.common import arguments, progress  # noqa: E402
from bench.results import record  # noqa: E402
from events import Actor  # noqa: E402
from events.subjects import DEFAULT_PARTITIONS, LogLayout  # noqa: E402
from services.ingest.bulk import BulkIngest  # noqa: E402
from services.ingest.bulk_lines import count_lines, iter_commands  # noqa: E402
from services.ingest.cli import freeze_survivors, throttled_advance  # noqa: E402
from services.log import ClaimLog, NatsTls, StreamSpec, connect  # noqa: E402
from services.log.connection import encode_headers  # noqa: E402
from services.log.signing import Signer  # noqa: E402
from services.runtime.cluster import LocalCluster  # noqa: E402
from services.runtime.embedded import EmbeddedNats  # noqa: E402
from services.runtime.from_settings import run  # noqa: E402
from tests.builders.workload import write_commands  # noqa: E402

console = Console()
ACTOR = Actor(id="ingest-bot", kind="model", model="pipeline-2")
BATCH = 1000


@dataclass(frozen=True)
class Target:
    """Where a run writes: the admin's URL, the TLS a client needs (a cluster's), the copies each stream keeps."""

    url: str
    tls: NatsTls | None = None
    replicas: int = 1


@contextmanager
def serving(home: Path, sync: str, cluster: int) -> Iterator[Target]:
    """A fresh embedded nats-server, or a fresh local cluster of ``cluster`` nodes."""
    if cluster:
        with LocalCluster(home, size=cluster, sync=sync) as nodes:
            yield Target(nodes.url_for("admin"), nodes.tls, cluster)
    else:
        with EmbeddedNats(home, sync=sync) as server:
            yield Target(server.url_for("admin"))


async def claimlog_bulk(target: Target, path: Path, label: str, signer: Signer | None = None) -> tuple[float, float, int]:
    nc = await connect(target.url, tls=target.tls)
    log = ClaimLog(nc, StreamSpec("CLAIMS", replicas=target.replicas), signer=signer)
    await log.ensure()
    started = time.perf_counter()
    with progress() as bar:
        task = bar.add_task(label, total=count_lines(path), rate="")
        ingest = BulkIngest(log, ACTOR, on_line=throttled_advance(bar, task, "commands"), after_batch=freeze_survivors)  # as the command runs it
        report = await ingest.run(iter_commands(path))
    elapsed = time.perf_counter() - started
    await nc.drain()
    assert not report.rejected, report.rejected[:3]
    return (report.accepted or report.present) / elapsed, elapsed, report.accepted


def _claim_of(raw: bytes) -> str:
    return json.loads(raw)["claim_id"]


async def peer_batches(target: Target, path: Path, *, plain: bool = False) -> tuple[float, float]:
    """Raw atomic batches of the file's lines over many claims, the same headers, one batch in flight,
    into a stream laid out as claimlog's (its subject transform storing each claim in its partition;
    ``plain``: a stream without one, as before partitions)."""
    nc = await connect(target.url, tls=target.tls)
    layout = LogLayout(prefix="peerb", partitions=0 if plain else DEFAULT_PARTITIONS)
    transform = None if layout.transform is None else SubjectTransform(src=layout.transform[0], dest=layout.transform[1])
    await nc.jetstream().add_stream(StreamConfig(
        name="PEERB", subjects=layout.stream_subjects, subject_transform=transform, allow_atomic=True, num_replicas=target.replicas,
    ))
    reply = nc.new_inbox()
    sub = await nc.subscribe(reply, max_msgs=0)
    last: dict[str, int] = {}
    started, count = time.perf_counter(), 0

    async def send(batch: list[tuple[str, bytes]]) -> None:
        batch_id, heads = uuid.uuid4().hex, {}
        for number, (claim_id, data) in enumerate(batch, start=1):
            headers = {"Nats-Msg-Id": str(uuid.uuid4())}
            if claim_id not in heads:
                heads[claim_id] = number
                headers["Nats-Expected-Last-Subject-Sequence"] = str(last.get(claim_id, 0))
                headers["Nats-Expected-Last-Subject-Sequence-Subject"] = layout.claim_filter(claim_id)
            headers |= {"Nats-Batch-Id": batch_id, "Nats-Batch-Sequence": str(number)}
            if number == len(batch):
                headers["Nats-Batch-Commit"] = "1"
            await nc.publish(layout.publish_subject(claim_id, "Event"), data, reply=reply if number == len(batch) else "", headers=encode_headers(headers))
        ack = json.loads((await sub.next_msg(timeout=30)).data)
        assert "error" not in ack, ack
        first = ack["seq"] - len(batch) + 1
        for number, (claim_id, _) in enumerate(batch):
            last[claim_id] = first + number

    batch: list[tuple[str, bytes]] = []
    with path.open("rb") as lines:
        for raw in lines:
            batch.append((_claim_of(raw), raw.rstrip(b"\n")))
            if len(batch) == BATCH:
                await send(batch)
                count, batch = count + len(batch), []
    if batch:
        await send(batch)
        count += len(batch)
    elapsed = time.perf_counter() - started
    await nc.drain()
    return count / elapsed, elapsed


async def peer_pipelined(target: Target, path: Path, window: int = 512) -> tuple[float, float]:
    """Raw pipelined single appends with Nats-Msg-Id and the per-claim expected sequence, chained per claim."""
    nc = await connect(target.url, tls=target.tls)
    js = nc.jetstream()
    await js.add_stream(name="PEER", subjects=["peer.>"], num_replicas=target.replicas)
    by_claim: dict[str, list[bytes]] = {}
    for raw in path.read_bytes().splitlines():
        by_claim.setdefault(_claim_of(raw), []).append(raw)
    slots = asyncio.Semaphore(window)

    async def one_claim(claim_id: str, items: list[bytes]) -> None:
        seq = 0
        for data in items:
            async with slots:
                headers = {
                    "Nats-Msg-Id": str(uuid.uuid4()),
                    "Nats-Expected-Last-Subject-Sequence": str(seq),
                    "Nats-Expected-Last-Subject-Sequence-Subject": f"peer.claims.{claim_id}.*",
                }
                seq = (await js.publish(f"peer.claims.{claim_id}.Event", data, headers=headers)).seq

    claims = iter(by_claim.items())

    async def worker() -> None:
        for claim_id, items in claims:
            await one_claim(claim_id, items)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(window)))
    elapsed = time.perf_counter() - started
    await nc.drain()
    return sum(map(len, by_claim.values())) / elapsed, elapsed


async def cli_ingest(tmp: Path, path: Path, sync: str, cluster: int = 0) -> tuple[float, float, float]:
    """``claimlog ingest`` as a command into a fresh server (or cluster): events/s end to end and its peak memory (MB)."""
    from services.identity.actors import ActorStore

    with serving(tmp / "nats-cli", sync, cluster) as target:
        nc = await connect(target.url, tls=target.tls)
        token = (await (await ActorStore.open(nc, create=True, replicas=target.replicas)).issue(ACTOR))[0]
        await nc.close()
        env = {**os.environ, "CLAIMLOG_NATS_URL": target.url, "CLAIMLOG_TOKEN": token, "CLAIMLOG_NATS_REPLICAS": str(target.replicas)}
        if target.tls is not None and target.tls.ca is not None:
            env["CLAIMLOG_NATS_TLS_CA"] = str(target.tls.ca)
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", MEASURED_CLI, "ingest", str(path)], env=env, capture_output=True, text=True, check=False)
        elapsed = time.perf_counter() - started
    assert done.returncode == 0, done.stderr[-2000:]
    peak = float(done.stderr.rsplit("peak-rss-kb ", 1)[1].split()[0]) / 1024
    return count_lines(path) / elapsed, elapsed, peak


# The command run as ``python -m services.cli``, saying its own peak memory as it ends. Not
# ``getrusage``'s ``ru_maxrss``: on Linux a process keeps, across ``exec``, the peak of the address space
# it was forked with, so a command started by this bench after its in-process runs reports the bench's
# own peak (a run at 100,000 lines said 305 MB for a command whose own peak was 136 MB). ``VmHWM`` is
# the peak of the command's own address space; nor is the bench's ``RUSAGE_CHILDREN`` it (nats-server is a child too).
MEASURED_CLI = """
import re, resource, runpy, sys
sys.argv[0] = "claimlog"
try:
    runpy.run_module("services.cli", run_name="__main__")
finally:
    try:
        with open("/proc/self/status") as status:
            peak = int(re.search(r"VmHWM:\\s+(\\d+) kB", status.read())[1])
    except OSError:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print("peak-rss-kb", peak, file=sys.stderr)
"""


async def alternating(tmp: Path, path: Path, options) -> tuple[float, float, int, float, float, list[float]]:
    """The bulk path and the atomic-batch peer ``options.rounds`` times each, each into a fresh server,
    the first of each round alternating: a machine whose speed drifts during a run weighs on both alike.
    Returns the bulk path's events/s and seconds pooled over the rounds, the events it accepted in one,
    the peer's events/s and seconds pooled, and the ratio of each round."""
    ours_events = ours_s = peer_events = peer_s = 0.0
    accepted, ratios = 0, []
    for number in range(options.rounds):
        got: dict[str, tuple[float, float]] = {}
        for which in ("ours", "peer") if number % 2 == 0 else ("peer", "ours"):
            with serving(tmp / f"nats-{number}-{which}", options.sync, options.cluster) as target:
                if which == "ours":
                    rate, seconds, accepted = await claimlog_bulk(target, path, f"claimlog bulk, round {number + 1}")
                else:
                    rate, seconds = await peer_batches(target, path)
                got[which] = (rate, seconds)
        ours_events, ours_s = ours_events + got["ours"][0] * got["ours"][1], ours_s + got["ours"][1]
        peer_events, peer_s = peer_events + got["peer"][0] * got["peer"][1], peer_s + got["peer"][1]
        ratios.append(got["ours"][0] / got["peer"][0])
    return ours_events / ours_s, ours_s, accepted, peer_events / peer_s, peer_s, ratios


async def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--claims", type=int, default=10_000)
    parser.add_argument("--per-claim", type=int, default=10)
    parser.add_argument("--cluster", type=int, default=0, metavar="N", help="a local cluster of N nodes, N copies of each stream")
    parser.add_argument("--no-pipelined-peer", action="store_true")
    parser.add_argument("--no-batch-peer", action="store_true", help="skip the atomic-batch peer (a memory-only run)")
    parser.add_argument("--plain-peer", action="store_true", help="also the atomic-batch peer into a stream without partitions, on a fresh server")
    parser.add_argument("--no-cli", action="store_true")
    parser.add_argument("--no-again", action="store_true", help="skip running the same file again")
    parser.add_argument("--signed", action="store_true", help="run the bulk path again, every batch signed, into a fresh server")
    parser.add_argument("--rounds", type=int, default=1, help="the bulk path and the atomic-batch peer this many times each, "
                        "alternating which goes first, each into a fresh server; figures pooled over the rounds "
                        "(implies --no-again and --no-pipelined-peer)")
    options = parser.parse_args()
    load = os.getloadavg()[0]  # the machines are shared: the figures say how busy it was when the run began
    rounds: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "commands.jsonl"
        lines = write_commands(path, claims=options.claims, per_claim=options.per_claim)
        if options.rounds > 1:
            again = again_s = pipelined = None
            ours, ours_s, accepted, batches, batches_s, rounds = await alternating(Path(tmp), path, options)
        else:
            with serving(Path(tmp) / "nats", options.sync, options.cluster) as target:
                ours, ours_s, accepted = await claimlog_bulk(target, path, "claimlog bulk")
                again, again_s, _ = (None, None, None) if options.no_again else await claimlog_bulk(target, path, "again (all present)")
                batches, batches_s = (None, None) if options.no_batch_peer else await peer_batches(target, path)
                pipelined = None if options.no_pipelined_peer else await peer_pipelined(target, path)
        plain = None
        if options.plain_peer:
            with serving(Path(tmp) / "nats-plain", options.sync, options.cluster) as target:
                plain = await peer_batches(target, path, plain=True)
        signed = None
        if options.signed:
            with serving(Path(tmp) / "nats-signed", options.sync, options.cluster) as target:
                signed = await claimlog_bulk(target, path, "claimlog bulk, signed", Signer.generate())
        cli = None if options.no_cli else await cli_ingest(Path(tmp), path, options.sync, options.cluster)
    where = f", a {options.cluster}-node cluster with {options.cluster} copies" if options.cluster else ""
    table = Table(title=f"Bulk ingestion: {lines:,} commands over {options.claims:,} claims, sync {options.sync}{where}")
    for column in ("", "events/s", "seconds", "vs atomic-batch peer"):
        table.add_column(column, justify="right" if column else "left")
    ratio = (lambda value: f"{value / batches:.2f}") if batches else (lambda value: "")
    table.add_row("claimlog bulk path (validate, decide, atomic batches)", f"{ours:,.0f}", f"{ours_s:.1f}", ratio(ours))
    if signed:
        table.add_row("claimlog bulk path, every batch signed", f"{signed[0]:,.0f}", f"{signed[1]:.1f}", ratio(signed[0]))
    if again:
        table.add_row("same file again (nothing new)", f"{again:,.0f}", f"{again_s:.1f}", "")
    if batches:
        table.add_row("peer: raw atomic batches of 1,000, same headers, claimlog's stream layout", f"{batches:,.0f}", f"{batches_s:.1f}", "1.00")
    if plain:
        table.add_row("peer: the same into a stream without partitions", f"{plain[0]:,.0f}", f"{plain[1]:.1f}", ratio(plain[0]))
    if pipelined:
        table.add_row("peer: raw pipelined single appends, same headers", f"{pipelined[0]:,.0f}", f"{pipelined[1]:.1f}", ratio(pipelined[0]))
    if cli:
        table.add_row(f"claimlog ingest command, end to end (peak {cli[2]:.0f} MB)", f"{cli[0]:,.0f}", f"{cli[1]:.1f}", ratio(cli[0]))
    console.print(table)
    console.print(f"accepted {accepted:,} events; targets with --sync always: 20,000 events/s and 0.8 of the atomic-batch peer")
    busy = f"load average {load:.1f} at the start"
    if rounds:
        console.print(f"{len(rounds)} rounds, alternating which went first; the bulk path against the peer, round by round: "
                      + ", ".join(f"{r:.2f}" for r in rounds))
        busy += f"; {len(rounds)} rounds alternating, each on a fresh server, pooled (ratio by round: {' '.join(f'{r:.2f}' for r in rounds)})"
    record("ingest", ours, unit="events/s", peer=batches, note=f"peer: raw atomic batches, same headers; {busy}")
    if signed:
        record("ingest, signed", signed[0], unit="events/s", peer=batches, note=f"one signature per batch; peer: raw atomic batches, unsigned; {busy}")
    if again:
        record("same file again", again, unit="lines/s")
    if plain:
        record("atomic batches into a stream without partitions (peer)", plain[0], unit="events/s", peer=batches, note="peer: raw atomic batches, claimlog's stream layout")
    if pipelined:
        record("pipelined single appends (peer)", pipelined[0], unit="events/s", peer=batches, note="peer: raw atomic batches")
    if cli:
        record("claimlog ingest end to end", cli[0], unit="events/s", peer=batches, note=f"start-up included; {busy}")
        record("claimlog ingest peak memory", cli[2], unit="MB", note=f"{lines:,} lines")


if __name__ == "__main__":
    run(main())
