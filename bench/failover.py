"""How long a dead NATS node holds up writes and folding: kill -9 the log's leader under two projector workers.

    python bench/failover.py [--lease 15] [--workers 2] [--rate 100] [--rounds 1] [--kill leader|follower]

Runs a local three-node cluster (services/runtime/cluster.py: three copies of every stream), two
`claimlog projector` worker processes on PostgreSQL (CLAIMLOG_TEST_POSTGRES_URL, a database of the
run's own), and this process appending a new claim every 1/rate seconds to random partitions. Before
the kill the leases bucket's leader is moved, when it can be, to the node that leads the log, as in a
run where one node led both. Then that node is killed (with ``--kill follower``, a node that leads
neither) and the script reports, from the kill:

- writes resumed: the first append sent after it and acknowledged;
- every partition folding again: the time by which each of the 16 partitions has committed an event
  sent after the kill, the slowest partition's and the fastest;
- the bound this is held to: writes resumed plus half a lease.

A figure of a run, recorded in bench/results.csv; not a timed test.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import create_engine, select, text  # noqa: E402
from sqlalchemy.engine import make_url  # noqa: E402

from bench.common import arguments  # noqa: E402
from bench.latency import draft  # noqa: E402
from bench.results import record  # noqa: E402
from events.subjects import DEFAULT_PARTITIONS, DEFAULT_PREFIX, DEFAULT_STREAM, LogLayout  # noqa: E402
from projections.tables import checkpoints  # noqa: E402
from services.log import ClaimLog, StreamSpec, connect  # noqa: E402
from services.log.names import leases_bucket  # noqa: E402
from services.projector.leases import ensure_bucket  # noqa: E402
from services.runtime.cluster import LocalCluster  # noqa: E402
from services.runtime.db import make_engine, upgrade  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
POSTGRES = os.environ.get("CLAIMLOG_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


class Appender:
    """Appends a new claim at a steady rate, retrying through the failover; notes when each was acknowledged."""

    def __init__(self, claim_log: ClaimLog, rate: float) -> None:
        self._log, self._every = claim_log, 1 / rate
        self.acked: list[tuple[float, int, int]] = []  # (when, sequence, partition)
        self.sent: list[float] = []  # when the try that was acknowledged was sent, for each of them
        self.failed: Counter[str] = Counter()  # appends refused or unanswered, by error
        self.stop = asyncio.Event()

    async def run(self) -> None:
        while not self.stop.is_set():
            n = random.randrange(10**7, 10**8)  # eight digits, as draft() writes them
            while not self.stop.is_set():
                sent = time.monotonic()
                try:
                    appended = await asyncio.wait_for(self._log.append(f"CLM-{n}", [draft(n)], expected_seq=0, prev_hash=None), 5)
                except Exception as error:  # noqa: BLE001 - a failover answers with errors and timeouts: try again
                    self.failed[type(error).__name__] += 1
                    await asyncio.sleep(0.05)
                    continue
                self.acked.append((time.monotonic(), appended.last_seq, self._log.layout.partition_of(f"CLM-{n}")))
                self.sent.append(sent)
                break
            await asyncio.sleep(self._every)


async def leader(claim_log: ClaimLog, stream: str) -> str:
    """The node leading ``stream`` (asked until one is elected)."""
    for _ in range(200):
        try:
            found = (await claim_log.nc.jetstream(timeout=2).stream_info(stream)).cluster.leader
            if found:
                return found
        except Exception:  # noqa: BLE001, S110 - no leader yet: ask again
            pass
        await asyncio.sleep(0.1)
    raise RuntimeError(f"{stream} has no leader")


async def lead_together(claim_log: ClaimLog, stream: str, other: str, *, tries: int = 10) -> bool:
    """Move ``other``'s leadership (a step-down elects anew) until the node leading ``stream`` leads it too."""
    for _ in range(tries):
        if await leader(claim_log, other) == await leader(claim_log, stream):
            return True
        await claim_log.nc.request(f"$JS.API.STREAM.LEADER.STEPDOWN.{other}", b"", timeout=5)
        await asyncio.sleep(1)
    return await leader(claim_log, other) == await leader(claim_log, stream)


def positions(engine) -> dict[int, int]:
    """Each partition's checkpoint, the lowest over the projections."""
    with engine.connect() as conn:
        rows = conn.execute(select(checkpoints.c.partition, checkpoints.c.last_seq).where(checkpoints.c.partitions == DEFAULT_PARTITIONS)).all()
    at: dict[int, int] = {}
    for partition, seq in rows:
        at[partition] = min(at.get(partition, seq), seq)
    return at


def worker(cluster: LocalCluster, database: str, name: str, *, lease: float, log_to: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ, "PYTHONPATH": str(ROOT), "CLAIMLOG_NATS_URL": cluster.url_for("projector"), "CLAIMLOG_NATS_TLS_CA": str(cluster.tls.ca),
        "CLAIMLOG_NATS_REPLICAS": "3", "CLAIMLOG_DATABASE_URL": database, "CLAIMLOG_WORKER_NAME": name,
        "CLAIMLOG_LEASE_SECONDS": str(lease), "CLAIMLOG_PARTITIONS": str(DEFAULT_PARTITIONS),
    }
    with open(log_to, "ab") as logfile:
        return subprocess.Popen([sys.executable, "-m", "services.cli", "projector"], env=env, cwd=ROOT, stdout=logfile, stderr=subprocess.STDOUT)


async def after_kill(appender: Appender, engine, killed_at: float, *, timeout: float = 120) -> tuple[float, dict[int, float]]:
    """Seconds from the kill until writes resumed, and until each partition committed an event appended after it."""
    folded: dict[int, float] = {}
    deadline = time.monotonic() + timeout
    while len(folded) < DEFAULT_PARTITIONS and time.monotonic() < deadline:
        at = await asyncio.to_thread(positions, engine)
        first_after: dict[int, int] = {}
        for (_, seq, partition), sent in zip(appender.acked, appender.sent, strict=True):
            if sent > killed_at and partition not in first_after:
                first_after[partition] = seq
        now = time.monotonic()
        for partition, seq in first_after.items():
            if partition not in folded and at.get(partition, 0) >= seq:
                folded[partition] = now - killed_at
        await asyncio.sleep(0.05)
    # An append sent before the kill may be acknowledged just after it: writes resumed when one sent after it was.
    resumed = min((when for (when, _, _), sent in zip(appender.acked, appender.sent, strict=True) if sent > killed_at), default=float("inf")) - killed_at
    return resumed, folded


async def one_round(home: Path, *, lease: float, workers: int, rate: float, kill: str = "leader") -> tuple[float, dict[int, float], str]:
    """One cluster, one database, one kill: (writes resumed, each partition folding again, what the killed node led)."""
    admin = create_engine(POSTGRES.replace("postgresql://", "postgresql+psycopg://"), isolation_level="AUTOCOMMIT")
    name = f"claimlog_failover_{uuid.uuid4().hex[:12]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    database = make_url(POSTGRES).set(database=name).render_as_string(hide_password=False)
    engine = make_engine(database)
    processes: list[subprocess.Popen[bytes]] = []
    try:
        upgrade(engine)
        with LocalCluster(home / "cluster", size=3) as cluster:
            nc = await connect(cluster.url_for("admin"), tls=cluster.tls)
            try:
                claim_log = ClaimLog(nc, StreamSpec(DEFAULT_STREAM, layout=LogLayout(DEFAULT_PREFIX, DEFAULT_PARTITIONS), replicas=3))
                await claim_log.ensure()
                bucket = leases_bucket(DEFAULT_STREAM)
                await ensure_bucket(nc.jetstream(), ttl=lease, replicas=3, bucket=bucket)
                processes = [worker(cluster, database, f"w{i}", lease=lease, log_to=home / f"w{i}.log") for i in range(workers)]
                appender = Appender(claim_log, rate)
                appending = asyncio.create_task(appender.run())
                try:
                    await _until(lambda: len(positions(engine)) == DEFAULT_PARTITIONS and len(appender.acked) > 100
                                 and min(positions(engine).values()) >= appender.acked[0][1], 120)
                except TimeoutError:
                    raise RuntimeError(f"no steady state: {len(appender.acked)} appended, failures {dict(appender.failed)}, "
                                       f"checkpoints {positions(engine)}") from None
                together = await lead_together(claim_log, DEFAULT_STREAM, f"KV_{bucket}")
                victim = await leader(claim_log, DEFAULT_STREAM)
                if kill == "follower":
                    leading = {victim, await leader(claim_log, f"KV_{bucket}")}
                    victim = next(node.name for node in cluster.nodes if node.name not in leading)
                await asyncio.sleep(2 * lease / 3)  # the leases renewed at least once since the step-downs
                killed_at = time.monotonic()
                cluster.kill_node(victim)
                resumed, folded = await after_kill(appender, engine, killed_at)
                appender.stop.set()
                await appending
            finally:
                await nc.close()
                for process in processes:
                    process.terminate()
                for process in processes:
                    try:
                        process.wait(15)
                    except subprocess.TimeoutExpired:
                        process.kill()
                        process.wait()
    finally:
        engine.dispose()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
    if kill == "follower":
        return resumed, folded, "neither the log nor the leases bucket"
    return resumed, folded, "the log and the leases bucket" if together else "the log"


async def _until(condition, timeout: float) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.1)


async def main(lease: float, workers: int, rate: float, rounds: int, *, keep: bool = False, kill: str = "leader") -> None:
    for n in range(rounds):
        home = Path(tempfile.mkdtemp(prefix="claimlog-failover-"))
        try:
            resumed, folded, led = await one_round(home, lease=lease, workers=workers, rate=rate, kill=kill)
        finally:
            if keep:
                print(f"the run's directory: {home}")
            else:
                shutil.rmtree(home, ignore_errors=True)
        slowest = max(folded.values(), default=float("inf"))
        missing = DEFAULT_PARTITIONS - len(folded)
        print(f"round {n + 1}: killed the node leading {led}; writes resumed after {resumed:.1f} s; "
              f"every partition folded again after {slowest:.1f} s (fastest {min(folded.values(), default=float('inf')):.1f} s"
              f"{f', {missing} never within 120 s' if missing else ''}); bound: {resumed + lease / 2:.1f} s")
        note = f"round {n + 1} of {rounds}; {workers} workers, lease {lease:g} s, {rate:g} appends/s; killed node led {led}"
        victim = "the log leader's" if kill == "leader" else "a follower's"
        record(f"writes resumed after {victim} kill", round(resumed, 2), unit="s", note=note)
        record("every partition folding again after the kill", round(slowest, 2), unit="s", peer=round(resumed + lease / 2, 2),
               note=note + "; peer: writes resumed plus half a lease")


if __name__ == "__main__":
    parser = arguments(__doc__)
    parser.add_argument("--lease", type=float, default=15.0, help="CLAIMLOG_LEASE_SECONDS of the workers")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rate", type=float, default=100, help="appends a second")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--keep", action="store_true", help="keep the run's directory (the workers' logs, the nodes' stores)")
    parser.add_argument("--kill", choices=("leader", "follower"), default="leader",
                        help="the node leading the log (and, when it can be moved there, the leases bucket), or one leading neither")
    args = parser.parse_args()
    asyncio.run(main(args.lease, args.workers, args.rate, args.rounds, keep=args.keep, kill=args.kill))
