"""Kill the log's leader while the transparency log integrates on a three-node cluster: no gap, no second tree."""

from __future__ import annotations

import asyncio
import contextlib

from services.log import ClaimLog
from services.log.reader import ClaimReader
from services.log.tlog_store import TlogStore
from services.runtime.cluster import LocalCluster
from services.tlog.integrator import Integrator, entry_of
from services.tlog.tree import checkpoint_of
from tests.builders import drafted
from tests.cluster.test_faults import leader_of
from tests.conftest import random_claim_id
from tlog.builder import TreeBuilder
from tlog.note import Ed25519Signer


async def _draft(claim_log: ClaimLog) -> None:
    claim = random_claim_id()
    for _ in range(100):  # an append during the election is answered 503: retried, as a producer does
        try:
            await claim_log.append(claim, [drafted(claim)], expected_seq=0, prev_hash=None)
            return
        except Exception:  # noqa: BLE001 - the node just killed, or no leader yet
            await asyncio.sleep(0.2)
    raise AssertionError(f"{claim} was never appended")


async def test_the_tree_continues_across_the_loss_of_the_log_leader(cluster: LocalCluster, replicated_log: ClaimLog):
    for _ in range(4):
        await asyncio.gather(*(_draft(replicated_log) for _ in range(250)))
    store = await TlogStore.open(replicated_log.nc, "CLAIMS", replicas=3)
    integrator = Integrator(replicated_log.nc, store, Ed25519Signer.generate("registry.test/cluster"), holder="one", batch=200)
    stop = asyncio.Event()
    running = asyncio.create_task(integrator.run(stop))
    try:
        while integrator.tree is None or integrator.tree.checkpoint.size == 0:
            await asyncio.sleep(0.01)
        cluster.kill_node(await leader_of(replicated_log, "CLAIMS"))  # mid-integration
        for _ in range(2):
            await asyncio.gather(*(_draft(replicated_log) for _ in range(100)))
        for _ in range(600):
            note, _ = await store.checkpoint()
            if note is not None and checkpoint_of(note, await store.tree()).size == 1200:
                break
            await asyncio.sleep(0.1)
    finally:
        stop.set()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(running, 30)
    final = checkpoint_of((await store.checkpoint())[0], await store.tree())
    assert final.size == 1200 and final.origin == "registry.test/cluster"
    async with ClaimReader(replicated_log.nc, "CLAIMS") as reader:
        stored = []
        while len(stored) < 1200:
            stored += await reader.read_log(after_seq=len(stored), limit=500)
    rebuilt = TreeBuilder()
    for message in stored:
        rebuilt.append(entry_of(message))
    assert [m.seq for m in stored] == list(range(1, 1201)) and rebuilt.root() == final.root
