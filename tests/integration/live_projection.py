"""A live projector following the read-model generations while a test rebuilds them, and the checks around it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from projections.checksum import table_checksums
from projections.registry import build_projections
from services.log import ClaimLog
from services.projector import LiveProjector
from services.rebuild.replay import rebuild_generation
from services.runtime.settings import Settings
from services.store.generations import Generations
from tests.integration.test_projector import append_history


@asynccontextmanager
async def live_projector(
    claim_log: ClaimLog, generations: Generations, claims: list[str], *, batch: int
) -> AsyncIterator[LiveProjector]:
    """The claims' histories appended, then a projector of every projection running (and following a switch
    of generation) until the block ends."""
    for claim_id in claims:
        await append_history(claim_log, claim_id)
    stop = asyncio.Event()
    live = LiveProjector(claim_log, generations, build_projections(), name="live", batch=batch)
    running = asyncio.create_task(live.run(stop))
    try:
        yield live
    finally:
        stop.set()
        await running


async def until(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.05)


async def assert_equals_a_full_rebuild(settings: Settings, generations: Generations, number: int) -> None:
    """Generation ``number`` has the tables (checksums) of another clean rebuild of the whole log."""
    full = await rebuild_generation(settings, generations, switch=False)
    with generations.engine(number).connect() as kept, generations.engine(full.generation).connect() as clean:
        assert table_checksums(kept) == table_checksums(clean)
