"""What the fault scenarios share: a fast publisher of a large log, the projector as a separate process,
its checkpoint and memory, and clean replays to compare with."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy import Engine, func, select

from events.subjects import LogLayout, event_subject
from projections.checksum import table_checksums
from projections.registry import build_projections
from projections.tables import checkpoints
from services.log import ClaimLog, StreamSpec, connect
from services.log.chain import chain
from services.projector.runner import Runner, Scope
from services.projector.writer import CheckpointedWriter
from services.runtime.db import make_engine, upgrade
from tests.builders.workload import claim_events

ROOT = Path(__file__).resolve().parents[2]
INTERLEAVE = 1000  # claims whose events are interleaved in the log, as pipelines and people interleave them


def workload(claims: int, per_claim: int, *, seed: int = 7, first: int = 0) -> Iterator[tuple[object, bytes]]:
    """(event, stored bytes) of ``claims`` claims with correct hash chains, blocks of claims interleaved."""
    rng = random.Random(seed)
    for start in range(first, first + claims, INTERLEAVE):
        block = [
            chain(claim_events(n, per_claim, rng), None)
            for n in range(start, min(start + INTERLEAVE, first + claims))
        ]
        for i in range(per_claim):
            for linked in block:
                if i < len(linked):
                    yield linked[i]


async def publish_workload(
    url: str, *, claims: int, per_claim: int, first: int = 0, window: int = 2000, partitions: int = 0
) -> int:
    """Publish the workload with many acknowledgements in flight (each checked); returns the log's head.
    The stream is made unpartitioned (one projector folds it) unless ``partitions`` says otherwise."""
    nc = await connect(url, name="faults-publisher")
    claim_log = ClaimLog(nc, log_spec(partitions))
    await claim_log.ensure()
    js = nc.jetstream()
    slots = asyncio.Semaphore(window)
    failures: list[BaseException] = []

    async def one(subject: str, data: bytes, msg_id: str) -> None:
        try:
            ack = await js.publish(
                subject, data, stream="CLAIMS", headers={"Nats-Msg-Id": msg_id}, timeout=30
            )
            if ack.duplicate:
                failures.append(RuntimeError(f"{msg_id} was already stored"))
        except BaseException as error:  # noqa: BLE001 - raised below
            failures.append(error)
        finally:
            slots.release()

    tasks: set[asyncio.Task] = set()
    for event, data in workload(claims, per_claim, first=first, seed=7 + first):
        await slots.acquire()
        task = asyncio.create_task(one(event_subject(event.claim_id, event.type), data, event.event_id))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    await asyncio.gather(*tasks)
    head = await claim_log.head()
    await nc.close()
    if failures:
        raise RuntimeError(f"{len(failures)} publishes failed, the first: {failures[0]!r}")
    return head


def log_spec(partitions: int = 0) -> StreamSpec:
    """The scenarios' stream: unpartitioned by default, folded by one projector whose checkpoint is one
    position in the log; partitioned for the workers' scenarios."""
    return StreamSpec("CLAIMS", layout=LogLayout("claims", partitions))


def migrated(url: str) -> Engine:
    """An engine on a migrated read-model database."""
    engine = make_engine(url)
    upgrade(engine)
    return engine


def start_projector(
    nats_url: str,
    database_url: str,
    *,
    name: str = "projector",
    batch: int = 1000,
    slow: str | None = None,
    poison: str | None = None,
    stall: Path | None = None,
    log_to: Path | None = None,
    partitions: int = 0,
    settings: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """``claimlog projector`` in its own process (``slow``: its batches sleep first, see slow_projector.py;
    ``poison``: a claim whose source withdrawals its claim-page fold raises on, see poisoned_projector.py;
    ``stall``: a file whose making stops the process inside its next batch's transaction, see stalled_projector.py;
    ``log_to``: a file for what it logs; ``partitions``: the log's (0: unpartitioned, one projector; more: the process is a worker);
    ``settings``: more CLAIMLOG_* variables, e.g. a worker's name and lease time)."""
    env = {
        **os.environ,
        "CLAIMLOG_PARTITIONS": str(partitions),
        "CLAIMLOG_NATS_URL": nats_url,
        "CLAIMLOG_DATABASE_URL": database_url,
        "CLAIMLOG_PROJECTOR_NAME": name,
        "CLAIMLOG_PROJECTOR_BATCH": str(batch),
        "PYTHONPATH": str(ROOT),
        "COLUMNS": "200",  # its log lines unwrapped
        **(settings or {}),
    }
    command = [sys.executable, "-m", "services.cli", "projector"]
    if slow is not None:
        env["FAULTS_SLOW"] = slow
        command = [sys.executable, str(Path(__file__).with_name("slow_projector.py")), "projector"]
    if stall is not None:
        env["FAULTS_STALL"] = str(stall)
        command = [sys.executable, str(Path(__file__).with_name("stalled_projector.py")), "projector"]
    if poison is not None:
        assert slow is None, "one wrapper at a time"
        env["FAULTS_POISON_CLAIM"] = poison
        command = [sys.executable, str(Path(__file__).with_name("poisoned_projector.py")), "projector"]
    if log_to is None:
        return subprocess.Popen(
            command, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
    with open(log_to, "ab") as logfile:
        return subprocess.Popen(command, env=env, cwd=ROOT, stdout=logfile, stderr=subprocess.STDOUT)


def sigkill(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGKILL)
    process.wait()


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL if it hangs."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            sigkill(process)


def checkpoint(engine: Engine) -> int:
    """The projector's committed position, as its database has it (0 before its first commit)."""
    with engine.connect() as conn:
        return conn.execute(select(func.min(checkpoints.c.last_seq))).scalar() or 0


async def wait_for_checkpoint(
    engine: Engine, *, beyond: int, timeout: float, process: subprocess.Popen[bytes] | None = None
) -> int:
    """Wait until the projector has committed past ``beyond``; fail if its process died meanwhile."""
    deadline = time.monotonic() + timeout
    while (seq := checkpoint(engine)) <= beyond:
        if process is not None and process.poll() is not None:
            raise AssertionError(f"the projector exited with code {process.returncode} at checkpoint {seq}")
        if time.monotonic() > deadline:
            raise AssertionError(
                f"the projector stayed at checkpoint {seq} for {timeout}s, waiting for > {beyond}"
            )
        await asyncio.sleep(0.02)
    return seq


def rss_mb(pid: int) -> float:
    """Resident memory of a process, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for process {pid}")


def checksums(engine: Engine) -> dict[str, str]:
    with engine.connect() as conn:
        return table_checksums(conn)


class CleanReplay:
    """A projector in this process folding the same log into its own database, step by step to a sequence."""

    def __init__(self, claim_log: ClaimLog, engine: Engine, *, name: str) -> None:
        self.claim_log, self.engine, self.name = claim_log, engine, name

    async def to(self, seq: int) -> dict[str, str]:
        """Apply every event through ``seq`` exactly (nothing after it); the table checksums there."""
        writer = CheckpointedWriter(self.engine, build_projections())
        projector = Runner(self.claim_log, writer, name=self.name, batch=5000, linger=0.02, scope=Scope(stop_at=seq))
        projector.load_checkpoint()
        if projector.checkpoint < seq:
            await projector.run_until(seq, timeout=180)
        assert checkpoint(self.engine) == seq, (
            f"the clean replay stopped at {checkpoint(self.engine)}, not {seq}"
        )
        return checksums(self.engine)
