"""Replay: rebuild the read models from a log of a million events, from a cold start, into SQLite and PostgreSQL.

    python bench/replay.py [--claims 100000] [--per-claim 10] [--postgres URL] [--peer-claims 2000]
    python bench/replay.py --as-of-only [--claims 100000] [--as-of-repeats 10] [--spread-long]   (the as-of page alone)

``--signed``: every event signed on its own by the API's delegate key, required from the first event.

Publishes the log once (claims' events interleaved a thousand claims at a time, as pipelines and
people interleave them), then for each database runs what `claimlog replay` runs
(``rebuild_generation``: a new generation from the first event, then the switch) in a fresh process,
which samples its own memory at every tenth of the log: the figures show whether memory stays flat as
the log grows. The peak is given twice: resident (which counts the pages of the new generation's file
that the index build maps) and private (what the processes hold themselves, sampled during the fold).
The peer in the same run is the Python ``eventsourcing`` library on the same workload (store the same
events, then project the same counts with its own projection runner), at a size it finishes in
reasonable time; the ratio compares rates. Targets: 30,000 events/s or more into SQLite and 15,000 or
more into PostgreSQL, so that a million-event log rebuilds in a minute or less (a rebuild is how a
projection changes); memory flat, so that a rebuild fits beside the live services whatever the log's
length; an as-of page of a claim with 1,000 events under 50 ms, so that the past reads like the
present. The long claims' events are appended after the log, each claim's together; with
``--spread-long`` they are spread evenly through it instead, as a claim that gathers events over the
log's whole life has them, so reading one makes the server walk more of the stream.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402
from sqlalchemy import create_engine, text  # noqa: E402
from sqlalchemy.engine import make_url  # noqa: E402

from bench.common import arguments, peak_rss_mb, percentile, progress  # noqa: E402
from bench.results import record  # noqa: E402
from events.subjects import event_subject  # noqa: E402
from services.log import ClaimLog, StreamSpec, connect  # noqa: E402
from services.log.chain import chain  # noqa: E402
from services.log.signing import Signer  # noqa: E402
from services.runtime.db import make_engine, upgrade  # noqa: E402
from services.runtime.embedded import EmbeddedNats  # noqa: E402
from services.runtime.from_settings import run  # noqa: E402
from tests.builders.workload import claim_events  # noqa: E402

console = Console()
BLOCK = 1000  # claims whose events are interleaved with each other


def workload(claims: int, per_claim: int, seed: int = 7):
    """The log, in publishing order: blocks of claims, each block's events interleaved round-robin."""
    rng = random.Random(seed)
    for start in range(0, claims, BLOCK):
        block = [chain(claim_events(n, per_claim, rng), None) for n in range(start, min(start + BLOCK, claims))]
        for i in range(per_claim):
            for linked in block:
                if i < len(linked):
                    yield linked[i]


def spread(events, extra: Sequence, every: int):
    """``events`` with one of ``extra`` after every ``every`` of them (any left over at the end)."""
    pending = iter(extra)
    for count, item in enumerate(events, 1):
        yield item
        if count % every == 0:
            yield from itertools.islice(pending, 1)
    yield from pending


# With --signed: the API's delegate key, which signs each event on its own (as one command's event is
# signed), registered and required from the first event; the figures' names then say "signed".
SIGNING: dict[str, Signer] = {}


def headers_of(event, data: bytes) -> dict[str, str]:
    """A published event's headers: its message id, and its signature when the run signs."""
    signer = SIGNING.get("delegate")
    return {"Nats-Msg-Id": event.event_id, **(signer.headers([data])[0] if signer is not None else {})}


def signed_name(figure: str) -> str:
    return f"{figure}, signed" if SIGNING else figure


async def register_delegate(url: str) -> None:
    """The delegate key in the key registry, signatures required from the first event."""
    from events import Actor
    from services.identity.keys import KeyRing

    nc = await connect(url, name="bench-keys")
    await ClaimLog(nc, StreamSpec("CLAIMS")).ensure()
    ring = await KeyRing.open(nc)
    await ring.add(Actor(id="claimlog-api", kind="service"), delegate=True, signer=SIGNING["delegate"])
    await ring.require(0)
    await nc.close()


async def publish(url: str, claims: int, per_claim: int, window: int = 2000, extra: Sequence = ()) -> tuple[int, float]:
    """Publish the workload, and ``extra`` events spread evenly through it, with many acknowledgements in
    flight; returns (events, events/s)."""
    nc = await connect(url, name="bench-publisher")
    await ClaimLog(nc, StreamSpec("CLAIMS")).ensure()
    js = nc.jetstream()
    slots = asyncio.Semaphore(window)
    failures: list[BaseException] = []

    async def one(subject: str, data: bytes, headers: dict[str, str]) -> None:
        try:
            await js.publish(subject, data, stream="CLAIMS", headers=headers)
        except BaseException as error:  # noqa: BLE001 - counted and raised below
            failures.append(error)
        finally:
            slots.release()

    total = claims * per_claim + len(extra)
    log = spread(workload(claims, per_claim), extra, max(1, claims * per_claim // max(1, len(extra))))
    if SIGNING:  # signed before the clock starts, so that no acknowledgement waits for the signing
        log = [(event, data, headers_of(event, data)) for event, data in log]
    started = time.perf_counter()
    tasks = set()
    with progress() as bar:
        task = bar.add_task("publish the log", total=total, rate="")
        for count, (event, data, *signed) in enumerate(log, 1):
            await slots.acquire()
            pending = asyncio.create_task(one(event_subject(event.claim_id, event.type), data, signed[0] if signed else headers_of(event, data)))
            tasks.add(pending)
            pending.add_done_callback(tasks.discard)
            if count % 5000 == 0:
                bar.update(task, completed=count, rate=f"{count / (time.perf_counter() - started):,.0f} events/s")
        await asyncio.gather(*tasks)
        bar.update(task, completed=total)
    await nc.close()
    if failures:
        raise RuntimeError(f"{len(failures)} publishes failed, the first: {failures[0]!r}")
    return total, total / (time.perf_counter() - started)


LONG_CLAIMS = 5  # claims of LONG_EVENTS events each, for the as-of page
LONG_EVENTS = 1000


def long_claims(first: int) -> list[list]:
    """Claims with 1,000 events each (sources, disagreements, reviews), each one's events chained."""
    rng = random.Random(11)
    return [chain(claim_events(number, LONG_EVENTS, rng), None) for number in range(first, first + LONG_CLAIMS)]


def interleaved(claims: list[list]) -> list:
    """The claims' events taking turns, each claim's in its own order."""
    return [linked[i] for i in range(LONG_EVENTS) for linked in claims]


async def publish_long_claims(url: str, claims: list[list]) -> None:
    """Append the long claims after the log, each one's events together."""
    nc = await connect(url, name="bench-long-claims")
    js = nc.jetstream()
    for linked in claims:
        headers = [headers_of(e, data) for e, data in linked]
        await asyncio.gather(
            *(js.publish(event_subject(e.claim_id, e.type), data, stream="CLAIMS", headers=h) for (e, data), h in zip(linked, headers, strict=True))
        )
    await nc.close()


async def measure_as_of(url: str, claim_ids: list[str], repeats: int, snapshots) -> dict[str, list[float]]:
    """Milliseconds to fold each long claim's page as of its next-to-last event (no cache), two ways: from
    its first event read from the log, and from its last snapshot at or before that point in the rebuilt
    read models (``snapshots``, their engine), as the read API does; the worst case for snapshots
    (SNAPSHOT_EVERY - 1 events to read and fold after it). Each page is checked against the first way's."""
    from services.timeline.as_of import AsOf, page_json_as_of

    nc = await connect(url, name="bench-as-of")
    claim_log = ClaimLog(nc, StreamSpec("CLAIMS"))
    points = {claim_id: [s.seq for s in await claim_log.read_claim(claim_id)][-2] for claim_id in claim_ids}
    expected = {claim_id: await page_json_as_of(claim_log, claim_id, AsOf(seq=seq)) for claim_id, seq in points.items()}
    timings: dict[str, list[float]] = {}
    for way, engine in (("from the first event", None), ("from the last snapshot (the read API)", snapshots)):
        timings[way] = []
        for _ in range(repeats):
            for claim_id, seq in points.items():
                started = time.perf_counter()
                page = await page_json_as_of(claim_log, claim_id, AsOf(seq=seq), snapshots=engine)
                timings[way].append((time.perf_counter() - started) * 1000)
                assert page == expected[claim_id], f"{claim_id} as of {seq} differs {way}"
    await nc.close()
    return timings


def as_of_both_ways(nats_url: str, database_url: str, claim_ids: list[str], repeats: int) -> dict[str, list[float]]:
    """As-of reads folded from the first event, and from the snapshots of the rebuilt read models."""
    from services.store.generations import Generations

    generations = Generations(database_url)
    try:
        return run(measure_as_of(nats_url, claim_ids, repeats, generations.active()[1]))
    finally:
        generations.close()


def child(nats_url: str, database_url: str) -> None:
    """In a fresh process: rebuild a new generation from the log, sampling memory every tenth of the log."""
    from services.rebuild.replay import rebuild_generation
    from services.runtime.settings import Settings
    from services.store.generations import Generations

    samples: dict[int, float] = {}
    tree_memory = TreeMemory()

    def sample(applied: int, head: int) -> None:
        tree = tree_memory()
        tenth = applied * 10 // max(head, 1)
        if tenth not in samples:
            samples[tenth] = tree

    # The rebuild's own account of its phases (fold, merge, indexes) goes to stderr, and into the report.
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logging.getLogger("services.rebuild.parallel").setLevel(logging.INFO)
    settings = Settings(nats_url=nats_url, database_url=database_url, data_dir=Path(tempfile.mkdtemp()))
    generations = Generations(database_url)
    started = time.perf_counter()
    rebuilt = run(rebuild_generation(settings, generations, progress=sample))
    elapsed = time.perf_counter() - started
    generations.close()
    print(json.dumps({"events": rebuilt.applied_through, "seconds": elapsed, "rss": samples, "peak": max(tree_memory.peak, peak_rss_mb()), "peak_private": tree_memory.peak_private}))


class TreeMemory:
    """Resident memory of this process and its descendants (a parallel replay's workers), in MB, at
    each call; and the peaks seen, resident and private. Private memory is resident less the file
    pages a process maps: the index build maps the new generation's file, which is in the OS's cache
    anyway, so it is what the processes themselves hold.

    Listing the descendants reads every process's parent on the machine; doing it at each progress
    report (five times a second) cost the rebuilding process several seconds of CPU on a million-event
    log, inside the figure it measures. They are listed again only every ``refresh`` seconds.
    """

    def __init__(self, refresh: float = 2.0) -> None:
        self._me = psutil.Process()
        self._refresh, self._listed_at, self._tree = refresh, float("-inf"), [self._me]
        self.peak = self.peak_private = 0.0

    def __call__(self) -> float:
        if time.monotonic() - self._listed_at > self._refresh:
            self._tree, self._listed_at = [self._me, *self._me.children(recursive=True)], time.monotonic()
        resident = private = 0
        for process in self._tree:
            try:
                info = process.memory_info()
            except psutil.NoSuchProcess:
                continue  # a worker that has ended since the list was made
            resident, private = resident + info.rss, private + info.rss - info.shared
        self.peak, self.peak_private = max(self.peak, resident / 2**20), max(self.peak_private, private / 2**20)
        return resident / 2**20


def replay_in_child(nats_url: str, database_url: str) -> dict:
    with console.status(f"replaying into {make_url(database_url).get_backend_name()} (a fresh process)"):
        done = subprocess.run(
            [sys.executable, __file__, "--child", nats_url, database_url], capture_output=True, text=True, check=False
        )
    if done.returncode != 0:
        raise RuntimeError(f"the replay failed:\n{done.stderr[-3000:]}")
    for line in done.stderr.splitlines():  # the rebuild's log: its phases, and any warning
        console.print(f"{make_url(database_url).get_backend_name()}: {line}", markup=False, highlight=False)
    return json.loads(done.stdout.strip().splitlines()[-1])


def fresh_postgres(url: str) -> tuple[str, callable]:
    admin = create_engine(make_url(url).set(drivername="postgresql+psycopg"), isolation_level="AUTOCOMMIT")
    name = f"claimlog_bench_{uuid.uuid4().hex[:8]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))

    def drop() -> None:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()

    return make_url(url).set(database=name).render_as_string(hide_password=False), drop


def peer(claims: int, per_claim: int, database: str) -> dict | None:
    try:
        from bench.peer_eventsourcing import run_peer
    except ImportError as error:
        console.print(f"[yellow]peer skipped[/yellow]: {error} (pip install -e '.[bench]')")
        return None
    events = [event for event, _ in workload(claims, per_claim)]
    return run_peer(events, database=database)


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--claims", type=int, default=100_000)
    parser.add_argument("--per-claim", type=int, default=10)
    parser.add_argument("--postgres", default=os.environ.get("CLAIMLOG_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"))
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--peer-claims", type=int, default=2000, help="Claims in the peer's run (0: no peer).")
    parser.add_argument("--child", nargs=2, metavar=("NATS_URL", "DATABASE_URL"), help=argparse_hidden())
    parser.add_argument(
        "--as-of-only", action="store_true", help="Measure only the as-of page: publish the log and the long claims, replay into SQLite only, no peer."
    )
    parser.add_argument(
        "--spread-long", action="store_true",
        help="Spread the long claims' events evenly through the log, instead of appending each claim's together after it.",
    )
    parser.add_argument("--as-of-repeats", type=int, default=10, help="Reads of each long claim's as-of page (default 10).")
    parser.add_argument("--signed", action="store_true", help="Each event signed by the API's delegate key, signatures required from the first.")
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    work = Path(tempfile.mkdtemp(prefix="claimlog-bench-replay-"))
    server = EmbeddedNats(work / "nats", sync=args.sync)
    server.start()
    results, cleanups = {}, []
    try:
        if args.signed:
            SIGNING["delegate"] = Signer.generate()
            run(register_delegate(server.url_for("admin")))
        long = long_claims(args.claims)
        extra = interleaved(long) if args.spread_long else []
        events, publish_rate = run(publish(server.url_for("admin"), args.claims, args.per_claim, extra=extra))
        if not args.spread_long:
            run(publish_long_claims(server.url_for("admin"), long))
            events += LONG_CLAIMS * LONG_EVENTS
        long_ids = [linked[0][0].claim_id for linked in long]
        targets = {"sqlite": f"sqlite:///{work / 'claimlog.sqlite3'}"}
        if not (args.no_postgres or args.as_of_only):
            url, drop = fresh_postgres(args.postgres)
            targets["postgresql"], cleanups = url, [drop]
        for kind, url in targets.items():
            upgrade(make_engine(url))
            results[kind] = replay_in_child(server.url_for("admin"), url)
        as_of = as_of_both_ways(server.url_for("admin"), targets["sqlite"], long_ids, args.as_of_repeats)
        if args.as_of_only:
            return report_as_of(as_of)
        peers = {}
        if args.peer_claims:
            peers["sqlite"] = peer(args.peer_claims, args.per_claim, str(work / "peer.sqlite3"))
            if not args.no_postgres:
                peers["postgresql"] = peer(args.peer_claims, args.per_claim, args.postgres)
    finally:
        server.stop()
        for cleanup in cleanups:
            cleanup()
    report(events, publish_rate, results, peers, args, as_of)


def argparse_hidden() -> str:
    import argparse

    return argparse.SUPPRESS


def report(events: int, publish_rate: float, results: dict, peers: dict, args, as_of: list[float]) -> None:
    table = Table(title=f"replay of {events:,} events ({args.claims:,} claims), published at {publish_rate:,.0f}/s")
    for column in ("database", "claimlog events/s", "memory at 10% .. 100% of the log, all processes (MB)", "peak MB", "peak private MB", "peer", "ratio", "target"):
        table.add_column(column)
    targets = {"sqlite": "≥ 30,000/s", "postgresql": "≥ 15,000/s"}
    for kind, result in results.items():
        rate = result["events"] / result["seconds"]
        rss = " ".join(f"{result['rss'][k]:.0f}" for k in sorted(result["rss"], key=int) if int(k) > 0)
        found = peers.get(kind)
        peer_text = f"store {found['stored_per_s']:,.0f}/s, project {found['projected_per_s']:,.0f}/s ({found['events']:,} events)" if found else "-"
        ratio = f"{rate / found['projected_per_s']:,.1f}x" if found else "-"
        table.add_row(kind, f"{rate:,.0f}", rss, f"{result['peak']:.0f}", f"{result['peak_private']:.0f}", peer_text, ratio, targets[kind])
        name = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}[kind]
        record(signed_name(f"rebuild into {name}"), rate, unit="events/s", peer=found["projected_per_s"] if found else None)
        record(signed_name(f"peak private memory, {name}"), result["peak_private"], unit="MB")
    console.print(table)
    report_as_of(as_of)


AS_OF_FIGURES = {
    "from the first event": "as-of page from its first event p99",
    "from the last snapshot (the read API)": "as-of page from its snapshot p99",
}


def report_as_of(as_of: dict[str, list[float]]) -> None:
    for way, timings in as_of.items():
        p99 = percentile(timings, 99)
        record(signed_name(AS_OF_FIGURES[way]), p99, unit="ms")
        verdict = "met" if p99 < 50 else "NOT met"
        console.print(
            f"as-of page of a claim with {LONG_EVENTS:,} events, {way} (no cache), {len(timings)} reads: "
            f"p50 {statistics.median(timings):.1f} ms, p99 {p99:.1f} ms, max {max(timings):.1f} ms -> target p99 < 50 ms {verdict}"
        )


if __name__ == "__main__":
    main()
