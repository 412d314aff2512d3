"""A rebuild's consumers leave the stream when it ends, whether it succeeded or failed."""

from __future__ import annotations

import nats
import pytest
from nats.js.api import ConsumerConfig
from sqlalchemy import Engine

from services.log import ClaimLog
from services.log.consumer import FORGET_IDLE_SECONDS
from services.rebuild.replay import rebuild_generation
from services.runtime.settings import Settings
from services.store.generations import Generations
from tests.conftest import random_claim_id
from tests.integration.test_projector import append_history, project_all
from tests.integration.test_replay import _UnusablePlaces


async def consumers(nats_url: str) -> dict[str, float | None]:
    """Every consumer on the log, and after how many idle seconds the server deletes it."""
    nc = await nats.connect(nats_url)
    try:
        return {c.name: c.config.inactive_threshold for c in await nc.jetstream().consumers_info("CLAIMS")}
    finally:
        await nc.close()


async def test_a_serial_and_a_parallel_replay_leave_no_consumer_of_their_own(
    nats_url: str, claim_log: ClaimLog, engine: Engine, generations: Generations, settings: Settings
):
    for _ in range(4):
        await append_history(claim_log, random_claim_id())
    await project_all(claim_log, engine)
    live = await consumers(nats_url)

    await rebuild_generation(settings, generations, workers=1)
    await rebuild_generation(settings, generations, workers=2, parallel_from=0)
    await rebuild_generation(settings, generations, projections=["claim_pages"])

    assert await consumers(nats_url) == live
    assert all(idle == FORGET_IDLE_SECONDS for idle in live.values())  # and one left by a killed process goes too


async def test_a_failed_rebuild_leaves_no_consumer_even_one_its_killed_worker_made(
    nats_url: str, claim_log: ClaimLog, engine: Engine, settings: Settings
):
    for _ in range(3):
        await append_history(claim_log, random_claim_id())
    await project_all(claim_log, engine)
    live = await consumers(nats_url)
    # What a worker folding its share again from the log leaves when it is killed: its own consumer.
    await claim_log.nc.jetstream().add_consumer("CLAIMS", ConsumerConfig(durable_name=f"{settings.projector_name}-replay-g1-p0"))
    generations = _UnusablePlaces(settings.resolved_database_url())
    try:
        with pytest.raises(RuntimeError, match="replay worker"):
            await rebuild_generation(settings, generations, workers=2, parallel_from=0)
    finally:
        generations.close()

    assert await consumers(nats_url) == live
