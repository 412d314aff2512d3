"""Scaling the projection out: one partitioned log folded into PostgreSQL by 1, 2 and 4 `claimlog projector` workers.

    python bench/scale.py [--events 200000] [--claims 20000] [--postgres URL] [--workers 1 2 4] [--small]

Each run starts ``n`` real worker processes (``python -m services.cli projector``, as an operator
would, each with its own CLAIMLOG_WORKER_NAME) on the same log, into a fresh database, with a
consumer name of its own (CLAIMLOG_PROJECTOR_NAME), so every run folds the whole log from its first
event. The workers divide the partitions by lease, as in production: nothing tells a worker which
partitions are its own.

The leases settle before the timing starts: the bench holds every partition's lease itself (a
holder that does not announce itself as a worker, so no worker wants to wait for it) until all ``n``
workers have announced themselves, then gives every lease back at once. Each worker then takes its
share on its next look, and no partition moves during the run. The time from that release to the
last partition taken by its owner is printed as "leases taken" (it is inside the timing).

Per number of workers it prints:

- events/s, from the release of the leases to every partition's consumer having delivered and been
  acknowledged its partition's last event (a worker acknowledges a batch after its commit);
- the events each worker received (the delivered counts of its consumers, filtered to its partitions)
  and the messages and bytes the server sent each worker's connections (the server's /connz,
  matched to each process by its sockets), as shares: target at most 1/n of the events + 5%;
- CPU-seconds per event summed over the workers and the nats-server (from /proc, over the same
  span): target, with 4 workers, at most 1.15x that of one (the peer: one worker in the same run).

These machines have 2 cores, so events/s cannot double here: the shares and the CPU per event show
how the work divides. ``--small`` runs a tiny log (a smoke test runs it); ``--no-record`` leaves
bench/results.csv alone.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402
from nats.js.errors import NotFoundError  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402
from sqlalchemy import create_engine, make_url, text  # noqa: E402

from bench.common import publish_backlog  # noqa: E402
from bench.partitions import server_cpu_seconds  # noqa: E402
from bench.results import record  # noqa: E402
from services.log import ClaimLog, StreamSpec, connect  # noqa: E402
from services.log.names import leases_bucket  # noqa: E402
from services.projector.leases import Leases, assignment, ensure_bucket  # noqa: E402
from services.projector.worker import runs_of  # noqa: E402
from services.runtime.db import make_engine, upgrade  # noqa: E402
from services.runtime.embedded import EmbeddedNats  # noqa: E402

console = Console()
ROOT = Path(__file__).resolve().parents[1]
LEASE_SECONDS = 15.0
GATE = "scale-bench-gate"  # the holder of every lease until the workers are all up
POLL = 0.25


def monitored_nats(data_dir: Path, *, sync: str) -> EmbeddedNats:
    """The embedded server with its HTTP monitoring port open (for /connz)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return EmbeddedNats(data_dir, sync=sync, monitor_port=port)


def process_cpu_seconds(pid: int) -> float:
    return server_cpu_seconds(pid)  # utime + stime from /proc/<pid>/stat


def local_ports(pid: int) -> set[int]:
    """The local TCP ports of ``pid``'s sockets (from /proc: its socket inodes, looked up in /proc/net/tcp)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[9] in inodes:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


async def connz(monitor_port: int) -> dict[int, dict]:
    """The server's connections by the client's port: messages and bytes sent to it (out_*) and from it (in_*)."""
    async with httpx.AsyncClient(timeout=5) as client:
        body = (await client.get(f"http://127.0.0.1:{monitor_port}/connz", params={"limit": 4096})).json()
    return {c["port"]: c for c in body.get("connections", [])}


def per_worker(pids: dict[str, int], connections: dict[int, dict]) -> dict[str, dict[str, int]]:
    """Each worker's connections' counters, summed."""
    sums = {}
    for name, pid in pids.items():
        ports = local_ports(pid)
        mine = [c for port, c in connections.items() if port in ports]
        sums[name] = {key: sum(c[key] for c in mine) for key in ("out_msgs", "out_bytes", "in_msgs", "in_bytes")} | {"connections": len(mine)}
    return sums


def fresh_database(admin_url: str) -> str:
    """A new, migrated PostgreSQL database next to ``admin_url``'s."""
    name = f"claimlog_scale_{uuid.uuid4().hex[:10]}"
    admin = create_engine(admin_url.replace("postgresql://", "postgresql+psycopg://"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    url = make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    engine = make_engine(url)
    upgrade(engine)
    engine.dispose()
    return url


def drop_database(admin_url: str, url: str) -> None:
    admin = create_engine(admin_url.replace("postgresql://", "postgresql+psycopg://"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{make_url(url).database}" WITH (FORCE)'))
    admin.dispose()


def start_worker(name: str, env: dict[str, str], logfile: Path) -> subprocess.Popen[bytes]:
    with logfile.open("ab") as out:
        return subprocess.Popen([sys.executable, "-m", "services.cli", "projector"], env=env | {"CLAIMLOG_WORKER_NAME": name},
                                stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)


def stop_workers(processes: dict[str, subprocess.Popen[bytes]]) -> None:
    for process in processes.values():
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in processes.values():
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()



def runs(infos: dict, prefix: str, worker: str) -> list:
    """The consumers ``worker`` made: one per runner it started (one, when no partition moved)."""
    start = runs_of(prefix, worker)
    return [info for name, info in infos.items() if name.startswith(start)]

async def fold_with(n: int, server: EmbeddedNats, url: str, database: str, lasts: dict[int, int], head: int, workdir: Path) -> dict:
    """Run ``n`` workers over the log into ``database``, the leases held back until all have announced themselves."""
    partitions = len(lasts)
    prefix = f"scale-n{n}"
    names = [f"scale-w{i}" for i in range(1, n + 1)]
    env = {
        **os.environ, "CLAIMLOG_NATS_URL": url, "CLAIMLOG_DATABASE_URL": database, "CLAIMLOG_PARTITIONS": str(partitions),
        "CLAIMLOG_PROJECTOR_NAME": prefix, "CLAIMLOG_LEASE_SECONDS": f"{LEASE_SECONDS:g}", "CLAIMLOG_DATA_DIR": str(workdir / prefix),
    }
    nc = await connect(url)
    js = nc.jetstream()
    gate = await Leases.open(js, GATE, ttl=LEASE_SECONDS, bucket=leases_bucket("CLAIMS"))
    held = [await gate.take(k) for k in range(partitions)]
    if any(lease is None for lease in held):
        raise RuntimeError(f"partitions already held by someone else: {await gate.holders(partitions)}")
    logs = {name: workdir / f"{prefix}-{name}.log" for name in names}
    processes = {name: start_worker(name, env, logs[name]) for name in names}
    try:
        started, renewed = time.monotonic(), time.monotonic()
        while not set(names) <= set(await gate.workers()):
            for name, process in processes.items():
                if process.poll() is not None:
                    raise RuntimeError(f"worker {name} exited with {process.returncode}: {logs[name].read_text()[-3000:]}")
            if time.monotonic() - started > 300:
                raise RuntimeError(f"the workers did not all announce themselves within 300 s: {await gate.workers()}")
            if time.monotonic() - renewed > LEASE_SECONDS / 3:
                held = [await gate.renew(lease) for lease in held]
                renewed = time.monotonic()
            await asyncio.sleep(POLL)
        pids = {name: process.pid for name, process in processes.items()}
        counters_before = per_worker(pids, await connz(server.monitor_port))
        cpu_before = {name: process_cpu_seconds(pid) for name, pid in pids.items()}
        server_before = server_cpu_seconds(server.process.pid)
        released = time.monotonic()
        await gate.give_back(held)

        owners = assignment(names, partitions)
        taken_after, seen = None, {}
        while True:
            for name, process in processes.items():
                if process.poll() is not None:
                    raise RuntimeError(f"worker {name} exited with {process.returncode}: {logs[name].read_text()[-3000:]}")
            if taken_after is None:
                holders = {k: owner for k, (owner, _) in (await gate.holders(partitions)).items()}
                if holders == owners:
                    taken_after = time.monotonic() - released
            infos = {info.name: info for info in await js.consumers_info("CLAIMS")}
            seen |= infos  # a runner started again (its partitions came over two looks) removed its first consumer
            done = all(
                any(info.delivered.stream_seq >= last and info.num_ack_pending == 0 and info.num_pending == 0
                    for info in runs(infos, prefix, owners[k]))
                for k, last in lasts.items()
            )
            if done:
                break
            if time.monotonic() - released > 3600:
                raise RuntimeError("the workers did not fold the log within an hour")
            await asyncio.sleep(POLL)
        wall = time.monotonic() - released
        server_cpu = server_cpu_seconds(server.process.pid) - server_before
        cpu = {name: process_cpu_seconds(pid) - cpu_before[name] for name, pid in pids.items()}
        counters_after = per_worker(pids, await connz(server.monitor_port))
        holders = {k: owner for k, (owner, _) in (await gate.holders(partitions)).items()}
    finally:
        stop_workers(processes)
    if holders != owners:
        raise RuntimeError(f"partitions moved during the run: held {holders}, expected {owners}")
    events = {
        name: sum(info.delivered.consumer_seq for info in runs(seen, prefix, name))
        for name in names
    }
    sent = {name: {key: counters_after[name][key] - counters_before[name][key] for key in ("out_msgs", "out_bytes")} for name in names}
    for name in [info.name for info in await js.consumers_info("CLAIMS") if info.name.startswith(f"{prefix}-")]:
        with contextlib.suppress(NotFoundError):
            await js.delete_consumer("CLAIMS", name)  # a worker gives its consumers back as it stops; what is left, here
    await nc.close()
    if sum(events.values()) < head:
        raise RuntimeError(f"the workers received {sum(events.values())} events of {head}")
    total_bytes = sum(s["out_bytes"] for s in sent.values())
    return {
        "rate": head / wall, "wall": wall, "taken_after": taken_after,
        "partitions": {name: sorted(k for k, owner in owners.items() if owner == name) for name in names},
        "events": events, "sent": sent,
        "events_share": max(events.values()) / head,
        "messages_share": max(s["out_msgs"] for s in sent.values()) / head,
        "bytes_share": max(s["out_bytes"] for s in sent.values()) / total_bytes,
        "cpu_per_event": (sum(cpu.values()) + server_cpu) / head,
        "workers_cpu": sum(cpu.values()), "server_cpu": server_cpu,
    }


async def publish(url: str, claims: int, per_claim: int) -> tuple[int, dict[int, int]]:
    nc = await connect(url)
    claim_log = ClaimLog(nc, StreamSpec("CLAIMS"))
    await claim_log.ensure()
    await ensure_bucket(nc.jetstream(), ttl=LEASE_SECONDS, bucket=leases_bucket("CLAIMS"))
    head = await publish_backlog(claim_log, claims=claims, per_claim=per_claim)
    layout, js = claim_log.layout, nc.jetstream()
    lasts = {}
    for k in range(layout.partitions):
        last = await js.get_last_msg("CLAIMS", layout.partition_filter(k), direct=True)
        lasts[k] = last.seq
    await nc.close()
    return head, lasts


def main(args: argparse.Namespace) -> None:
    if args.small:
        args.events, args.claims = 4_000, 400
    with tempfile.TemporaryDirectory(prefix="claimlog-scale-") as scratch:  # the server's store: tens of MB a run
        head, lasts, figures, load = measure(args, Path(scratch))
    report(head, len(lasts), figures, record_them=not args.no_record, small=args.small, load=load)


def measure(args: argparse.Namespace, workdir: Path) -> tuple[int, dict[int, int], dict[int, dict], float]:
    """The log published, then folded by each number of workers: the head, each partition's last sequence,
    the figures per number of workers, and the highest load average seen."""
    server = monitored_nats(workdir / "nats", sync=args.sync)
    url = server.start()
    figures: dict[int, dict] = {}
    load = os.getloadavg()[0]
    try:
        head, lasts = asyncio.run(publish(url, args.claims, args.events // args.claims))
        for n in args.workers:
            database = fresh_database(args.postgres)
            try:
                figures[n] = asyncio.run(fold_with(n, server, url, database, lasts, head, workdir))
            finally:
                drop_database(args.postgres, database)
            f = figures[n]
            console.print(f"{n} worker(s): {f['rate']:,.0f} events/s, CPU per event {f['workers_cpu'] / head * 1e6:,.0f} µs in the workers "
                          f"and {f['server_cpu'] / head * 1e6:,.0f} µs in nats-server, leases taken {f['taken_after']:.1f} s after release, "
                          f"partitions {f['partitions']}, events {f['events']}, sent {f['sent']}")
    finally:
        server.stop()
    return head, lasts, figures, max(load, os.getloadavg()[0])


def report(head: int, partitions: int, figures: dict[int, dict], *, record_them: bool, small: bool, load: float) -> None:
    one = figures.get(1)
    table = Table(title=f"{head:,} events in {partitions} partitions, folded into PostgreSQL by `claimlog projector` workers (load average {load:.1f})")
    for column in ("workers", "events/s", "most events to one worker (of the log)", "most messages sent to one worker (of the log)",
                   "most bytes sent to one worker (of all)", "CPU us/event (workers + nats)", "vs 1 worker", "leases taken (s)"):
        table.add_column(column, justify="right")
    for n, f in figures.items():
        ratio = f"{f['cpu_per_event'] / one['cpu_per_event']:.2f}x" if one else "-"
        table.add_row(str(n), f"{f['rate']:,.0f}", f"{f['events_share']:.1%} (target <= {1 / n + 0.05:.1%})", f"{f['messages_share']:.1%}",
                      f"{f['bytes_share']:.1%}", f"{f['cpu_per_event'] * 1e6:,.0f}", ratio, f"{f['taken_after']:.1f}")
    console.print(table)
    if not record_them:
        return
    note = (f"{head} events, {partitions} partitions, PostgreSQL, `claimlog projector` worker processes taking partitions by lease, "
            f"timed from the leases' release; load average {load:.1f}" + (", --small" if small else ""))
    for n, f in figures.items():
        peer = one if n != 1 else None
        record(f"scale: {n} worker(s), events/s", f["rate"], unit="events/s", peer=peer and peer["rate"], note=note + "; peer: one worker, same run")
        record(f"scale: {n} worker(s), most events to one worker", f["events_share"] * 100, unit="% of log",
               peer=round(100 / n + 5, 1), note=note + "; peer: the target 1/n + 5%")
        record(f"scale: {n} worker(s), most bytes to one worker", f["bytes_share"] * 100, unit="% of bytes", peer=round(100 / n, 1),
               note=note + "; the server's /connz; peer: an even split")
        record(f"scale: {n} worker(s), CPU per event (workers + nats-server)", f["cpu_per_event"] * 1e6, unit="us",
               peer=peer and peer["cpu_per_event"] * 1e6, note=note + "; peer: one worker, same run (target: 4 workers <= 1.15x)")
        record(f"scale: {n} worker(s), leases taken after release", f["taken_after"], unit="s", note=note + "; inside the timing")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sync", default="always", help="embedded nats-server sync_interval (always, or e.g. 2m)")
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--claims", type=int, default=20_000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--postgres", default=os.environ.get("CLAIMLOG_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"),
                        help="URL of a PostgreSQL database whose server the bench makes its databases on")
    parser.add_argument("--small", action="store_true", help="a tiny log (4,000 events), for a smoke test")
    parser.add_argument("--no-record", action="store_true", help="print the figures without appending them to bench/results.csv")
    main(parser.parse_args())
