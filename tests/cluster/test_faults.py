"""Losing a node loses nothing: kill -9 the log's leader during writes, bring it back, then kill -9 the node that
leads the token store. Every acknowledged event is in the log exactly once, writes resume by themselves after
each kill, and the read models (PostgreSQL) equal a clean replay of the log. How soon they resume is a figure of
bench/failover.py, not a bound here: an election takes NATS's election timeout and more on a loaded machine."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import Engine

from projections.registry import build_projections
from services.identity.actors import BUCKET
from services.log import ClaimLog
from services.projector import Projector
from services.runtime.cluster import LocalCluster
from services.runtime.settings import Settings
from services.store.generations import Generations
from tests.conftest import random_claim_id
from tests.integration.command_api import Api, draft, running_api
from tests.integration.live_projection import assert_equals_a_full_rebuild
from tests.waiting import until

pytestmark = pytest.mark.cluster
RESUME_WITHIN = 60.0  # seconds from a kill to the next acknowledged write past which writes are stuck, not slow


class Writer:
    """Drafts new claims one after another, retrying each until it is acknowledged or found already drafted."""

    def __init__(self, api: Api) -> None:
        self.api, self.acknowledged, self.found_drafted = api, [], []
        self.acked_at: list[float] = []
        self.unanswered: str | None = None  # the claim being tried when the writer was stopped
        self.stop = asyncio.Event()

    async def run(self) -> None:
        while not self.stop.is_set():
            claim = self.unanswered = random_claim_id()
            while not self.stop.is_set():
                try:
                    response = await asyncio.wait_for(self.api.send("draft_claim", "ada", **draft(claim)), 15)
                except Exception:  # noqa: BLE001 - a failover answers with errors and timeouts: try the same claim again
                    await asyncio.sleep(0.05)
                    continue
                if response.status_code == 201:
                    self.acknowledged.append(claim)
                    self.acked_at.append(time.monotonic())
                    self.unanswered = None
                    break
                if response.status_code == 409:  # an earlier try landed though its answer was lost
                    self.found_drafted.append(claim)
                    self.unanswered = None
                    break
                await asyncio.sleep(0.05)

    async def resumed_after(self, killed_at: float, *, writes: int = 3) -> float:
        """Seconds from ``killed_at`` to the first write acknowledged after it, once ``writes`` more have been."""
        deadline = time.monotonic() + 2 * RESUME_WITHIN
        while sum(at > killed_at for at in self.acked_at) < writes and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        return min((at for at in self.acked_at if at > killed_at), default=float("inf")) - killed_at


async def leader_of(claim_log: ClaimLog, stream: str) -> str:
    for _ in range(100):
        try:
            leader = (await claim_log.nc.jetstream(timeout=2).stream_info(stream)).cluster.leader
            if leader:
                return leader
        except Exception:  # noqa: BLE001, S110 - no leader yet: ask again
            pass
        await asyncio.sleep(0.1)
    raise AssertionError(f"{stream} has no leader")


async def kill(cluster: LocalCluster, writer: Writer, node: str) -> float:
    acknowledged = len(writer.acked_at)
    await until(lambda: len(writer.acked_at) >= acknowledged + 3, what="writes acknowledged before the kill", timeout=30)
    # ...and the writer goes straight on to its next: a write is in flight when the node dies.
    killed_at = time.monotonic()
    cluster.kill_node(node)
    return await writer.resumed_after(killed_at)


async def test_killing_the_log_leader_then_the_token_store_leader_loses_no_acknowledged_event(
    cluster: LocalCluster, replicated_log: ClaimLog, pg_engine: Engine, postgres_url: str, tmp_path: Path
):
    async for api in running_api(replicated_log, pg_engine):
        writer = Writer(api)
        writing = asyncio.create_task(writer.run())

        log_leader = await leader_of(replicated_log, "CLAIMS")
        first = await kill(cluster, writer, log_leader)
        await asyncio.to_thread(cluster.start_node, log_leader)
        await asyncio.to_thread(cluster.wait_for_node, log_leader)
        second = await kill(cluster, writer, await leader_of(replicated_log, f"KV_{BUCKET}"))
        writer.stop.set()
        await writing

    print(f"writes resumed {first:.2f} s after the log leader's kill, {second:.2f} s after the token store's; "
          f"{len(writer.acknowledged)} acknowledged")
    assert first < RESUME_WITHIN and second < RESUME_WITHIN, (first, second)
    drafted = Counter()
    head = await replicated_log.head()
    after = 0
    while after < head:
        events = await replicated_log.read_log(after_seq=after, limit=1000)
        drafted.update(e.event.claim_id for e in events if e.event.type == "ClaimDrafted")
        after = events[-1].seq
    assert writer.acknowledged and all(drafted[claim] == 1 for claim in writer.acknowledged)
    assert all(drafted[claim] == 1 for claim in writer.found_drafted)
    assert set(drafted) - {writer.unanswered} == set(writer.acknowledged) | set(writer.found_drafted)
    assert drafted[writer.unanswered] <= 1

    await Projector(replicated_log, pg_engine, build_projections(), name="projector", batch=1000).run_until(head)
    settings = Settings(nats_url=cluster.url_for("projector"), nats_tls_ca=cluster.tls.ca, database_url=postgres_url, nats_replicas=3, data_dir=tmp_path)
    generations = Generations(postgres_url)
    try:
        await assert_equals_a_full_rebuild(settings, generations, 0)
    finally:
        generations.close()
