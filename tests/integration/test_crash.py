"""SIGKILL the projector in the middle of a large ingest: after restarts the tables equal a clean replay.

The projector is a worker folding every partition of the log, each with a checkpoint of its own: it has
caught up when each partition's checkpoint has reached that partition's last event.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys

import pytest
from sqlalchemy import Engine, func, select

from projections.checksum import table_checksums
from projections.tables import checkpoints
from services.log import ClaimLog
from tests.builders import history
from tests.conftest import random_claim_id
from tests.integration.test_projector import project_all

CLAIMS = 1500  # x 14 events = 21,000 events


def start_projector(nats_url: str, database_url: str) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "CLAIMLOG_NATS_URL": nats_url,
        "CLAIMLOG_DATABASE_URL": database_url,
        "CLAIMLOG_PROJECTOR_BATCH": "250",
    }
    return subprocess.Popen([sys.executable, "-m", "services.cli", "projector"], env=env, stderr=subprocess.DEVNULL)


def checkpoint(engine: Engine) -> int:
    """The furthest any partition has been applied (it moves with every commit)."""
    with engine.connect() as conn:
        return conn.execute(select(func.max(checkpoints.c.last_seq))).scalar() or 0


def positions(engine: Engine) -> dict[int, int]:
    """Each checkpoint row's partition and its position (the lowest over the projections)."""
    with engine.connect() as conn:
        rows = conn.execute(select(checkpoints.c.partition, func.min(checkpoints.c.last_seq)).group_by(checkpoints.c.partition)).all()
    return dict(rows)


async def last_of_each_partition(claim_log: ClaimLog, head: int) -> dict[int, int]:
    last, after = {}, 0
    while after < head:
        stored = await claim_log.read_log(after_seq=after, limit=5000)
        for event in stored:
            last[claim_log.layout.partition_of_subject(event.subject) if claim_log.layout.partitioned else 0] = event.seq
        after = stored[-1].seq
    return last


def _tables(sums: dict[str, str]) -> dict[str, str]:
    """The read models' checksums; the checkpoints are kept per partition here and for the whole log in a replay."""
    return {table: value for table, value in sums.items() if table != "projection_checkpoints"}


async def wait_for_progress(engine: Engine, *, beyond: int) -> None:
    """Wait until the restarted projector has committed something new (it takes a second to start)."""
    async with asyncio.timeout(60):
        while checkpoint(engine) <= beyond:
            await asyncio.sleep(0.02)


async def publish(claim_log: ClaimLog, claims: list[str]) -> None:
    async with claim_log.pipeline(window=128) as pipeline:
        for claim_id in claims:
            await pipeline.submit(claim_id, history(claim_id), expected_seq=0, prev_hash=None)
            await asyncio.sleep(0)  # pace the ingest so the kills land in the middle of it


@pytest.mark.slow
async def test_sigkilled_projector_restarts_to_the_same_tables_as_a_clean_replay(
    claim_log: ClaimLog, nats_url: str, database_url: str, engine: Engine, replay_engine: Engine  # noqa: F811
):
    claims = [random_claim_id() for _ in range(CLAIMS)]
    projector = start_projector(nats_url, database_url)
    ingest = asyncio.create_task(publish(claim_log, claims))
    killed_at = []
    rng = random.Random(7)
    while not ingest.done() or len(killed_at) < 3:
        await wait_for_progress(engine, beyond=killed_at[-1] if killed_at else 0)
        await asyncio.sleep(rng.uniform(0.0, 0.3))  # the fault: a kill at a random moment of a batch
        projector.send_signal(signal.SIGKILL)
        projector.wait()
        killed_at.append(checkpoint(engine))
        projector = start_projector(nats_url, database_url)
    await ingest
    head = await claim_log.head()
    last = await last_of_each_partition(claim_log, head)
    try:
        async with asyncio.timeout(120):
            while not all(positions(engine).get(k, 0) >= seq for k, seq in last.items()):
                await asyncio.sleep(0.1)
    finally:
        projector.terminate()
        projector.wait()
    assert {k: positions(engine)[k] for k in last} == last  # nothing folded beyond the log
    assert sum(0 < seq < head for seq in killed_at) >= 3, f"no kill landed mid-ingest: {killed_at} of {head}"
    await project_all(claim_log, replay_engine, name="clean-replay")
    with engine.connect() as survived, replay_engine.connect() as replayed:
        assert _tables(table_checksums(survived)) == _tables(table_checksums(replayed))
    print(f"killed the projector at checkpoints {killed_at} of {head} events; tables equal a clean replay")
