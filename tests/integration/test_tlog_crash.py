"""SIGKILL the transparency log's integrator while it writes tiles: it resumes with no gap and no second tree."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from events.log_entry import decode_entry
from services.log import ClaimLog
from services.log.reader import ClaimReader
from services.log.tlog_store import TlogStore
from services.tlog.integrator import entry_of
from services.tlog.tree import checkpoint_of, consistency
from tests.builders import drafted
from tests.conftest import random_claim_id
from tlog.builder import TreeBuilder
from tlog.proofs import verify_consistency
from tlog.tiles import decode_bundle, tiles_for

pytestmark = pytest.mark.slow
MESSAGES = 6_000  # more than a round appends on a backlog (BACKLOG_BATCHES batches): the kill falls in the second


def start_integrator(nats_url: str, data_dir: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "CLAIMLOG_NATS_URL": nats_url, "CLAIMLOG_DATA_DIR": str(data_dir)}
    return subprocess.Popen([sys.executable, "-m", "services.cli", "tlog", "integrate"], env=env, stderr=subprocess.DEVNULL)


async def signed_size(store: TlogStore) -> tuple[int, str | None]:
    note, _ = await store.checkpoint()
    record = await store.tree()
    return (0, None) if note is None or record is None else (checkpoint_of(note, record).size, note)


async def test_a_killed_integrator_resumes_the_same_tree_without_a_gap(claim_log: ClaimLog, nats_url: str, tmp_path: Path):
    for start in range(0, MESSAGES, 500):
        await asyncio.gather(*(_draft(claim_log) for _ in range(start, start + 500)))
    store = await TlogStore.open(claim_log.nc, "CLAIMS")
    integrator = start_integrator(nats_url, tmp_path)
    try:
        while (first := await signed_size(store))[0] == 0:  # killed as it writes the next round's tiles
            await asyncio.sleep(0.01)
        integrator.send_signal(signal.SIGKILL)
        integrator.wait()
        origin = (await store.tree()).origin
        integrator = start_integrator(nats_url, tmp_path)
        for _ in range(600):
            if (await signed_size(store))[0] == MESSAGES:
                break
            await asyncio.sleep(0.1)
    finally:
        integrator.send_signal(signal.SIGTERM)
        integrator.wait(timeout=30)
    record = await store.tree()
    final = checkpoint_of((await store.checkpoint())[0], record)
    assert record.origin == origin and final.size == MESSAGES and first[0] < MESSAGES
    verify_consistency(first[0], MESSAGES, checkpoint_of(first[1], record).root, final.root,
                       await consistency(store, first[0], MESSAGES))
    async with ClaimReader(claim_log.nc, "CLAIMS") as reader:
        stored = []
        while len(stored) < MESSAGES:
            stored += await reader.read_log(after_seq=len(stored), limit=1000)
    expected = TreeBuilder()
    for message in stored:
        expected.append(entry_of(message))
    assert expected.root() == final.root  # every message once, in order: no gap, no repeat
    bundles = [t for t in tiles_for(MESSAGES) if t.level is None]
    entries = [e for t in bundles for e in decode_bundle(await store.tile(t.path()))]
    assert [decode_entry(e).claim_id for e in entries] == [m.subject.split(".")[-2] for m in stored]


async def _draft(claim_log: ClaimLog) -> None:
    claim = random_claim_id()
    await claim_log.append(claim, [drafted(claim)], expected_seq=0, prev_hash=None)
