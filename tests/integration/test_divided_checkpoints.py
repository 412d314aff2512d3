"""Checkpoints divided by the log's partitions on one database (SQLite and PostgreSQL): runners holding
some partitions each, side by side in one process, and the checkpoints they leave divided anew when
another number of partitions takes over (services/projector/positions.py). Runners of partitions folding side by side build what one
projector builds: tests/integration/test_partitioned_folds.py.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import Engine, insert, select, update

from projections.checksum import table_checksums
from projections.registry import build_projections
from projections.tables import checkpoints, claim_pages
from services.audit.rebuild import compare_read_models
from services.audit.verify import Report
from services.log import ClaimLog
from services.projector import LiveProjector, Projector
from services.projector.applied import applied
from services.projector.runner import to_entries
from services.projector.writer import CheckpointedWriter, Refused
from services.rebuild.replay import rebuild_generation
from services.runtime.settings import Settings
from services.store.generations import Generations
from tests.builders import attached
from tests.conftest import random_claim_id
from tests.integration.live_projection import until
from tests.integration.test_partitioned_folds import without_checkpoints
from tests.integration.test_projector import append_history, project_all

HALVES = 2


def half(claim_log: ClaimLog, engine: Engine, k: int, *, generations: Generations | None = None) -> Projector:
    """A runner of every other partition of the log (``k``: 0 or 1), as one of two workers holds them."""
    epochs = {p: 0 for p in range(claim_log.layout.partitions) if p % HALVES == k}
    if generations is not None:
        return LiveProjector(claim_log, generations, build_projections(), name=f"half-{k}", batch=5, epochs=epochs)
    return Projector(claim_log, engine, build_projections(), name=f"half-{k}", batch=5, epochs=epochs)


async def caught_up(claim_log: ClaimLog, engine: Engine) -> bool:
    now = await applied(claim_log, engine)
    return set(now.positions.values()) == {now.head}


async def run_halves(claim_log: ClaimLog, engine: Engine) -> None:
    """Both halves, side by side, until every projection's position is the head of the log."""
    stop = asyncio.Event()
    running = [asyncio.create_task(half(claim_log, engine, k).run(stop)) for k in range(HALVES)]
    try:
        async with asyncio.timeout(60):
            while not await caught_up(claim_log, engine):
                for task in running:
                    if task.done():
                        task.result()
                await asyncio.sleep(0.05)
    finally:
        stop.set()
        await asyncio.gather(*running)


def written_for(engine: Engine) -> set[tuple[str, int, int]]:
    with engine.connect() as conn:
        return {tuple(row) for row in conn.execute(select(checkpoints.c.name, checkpoints.c.partition, checkpoints.c.partitions))}


async def publish_claims(claim_log: ClaimLog, count: int = 12) -> list[str]:
    """Claims with whole histories, in both halves of the partitions (more than ``count`` when needed for that)."""
    claims = [random_claim_id() for _ in range(count)]
    while {claim_log.layout.partition_of(c) % HALVES for c in claims} != set(range(HALVES)):
        claims.append(random_claim_id())
    for claim_id in claims:
        await append_history(claim_log, claim_id)
    return claims


async def test_runners_of_partitions_taking_over_from_one_projector_divide_its_checkpoints_where_they_stand(
    claim_log: ClaimLog, engine: Engine, replay_engine: Engine
):
    claims = await publish_claims(claim_log)
    await project_all(claim_log, engine)  # one projector of the whole log: one row per projection
    names = [p.name for p in build_projections()]
    assert written_for(engine) == {(name, 0, 1) for name in names}
    for claim_id in claims:
        await append_history(claim_log, claim_id, [attached(claim_id, "more")])
    await run_halves(claim_log, engine)
    await project_all(claim_log, replay_engine, name="replay")
    with engine.connect() as divided, replay_engine.connect() as single:  # each partition's checkpoint at its own last event
        assert without_checkpoints(table_checksums(divided)) == without_checkpoints(table_checksums(single))
    partitions = claim_log.layout.partitions
    assert written_for(engine) == {(name, k, partitions) for name in names for k in range(partitions)}


async def test_partitions_standing_apart_are_not_divided_anew_and_the_error_says_what_to_do(claim_log: ClaimLog, engine: Engine):
    await publish_claims(claim_log)
    await run_halves(claim_log, engine)  # each partition's checkpoint at its own last event
    with pytest.raises(RuntimeError, match=r"written for 16 partition\(s\) of the log, standing at different positions .*`claimlog replay`"):
        await project_all(claim_log, engine)


async def test_a_runner_of_a_partition_divided_otherwise_since_is_fenced_off(claim_log: ClaimLog, engine: Engine):
    claims = await publish_claims(claim_log)
    await project_all(claim_log, engine)
    partition = claim_log.layout.partition_of(claims[0])
    stale = Projector(claim_log, engine, build_projections(), name="stale", batch=5, epochs={partition: 0})
    stale.load_checkpoint()  # divides the whole log's rows into the log's partitions
    # One projector of the whole log takes over where they all stand (the stale runner's checkpoint is still right).
    Projector(claim_log, engine, build_projections(), name="projector", batch=5).load_checkpoint()
    await append_history(claim_log, claims[0], [attached(claims[0], "late")])
    consumer = claim_log.consumer("stale", max_batch=100, partitions=[partition])
    await consumer.start(stale.checkpoint)
    deliveries = await consumer.next_batch(timeout=5)
    refused = await stale.writer.commit(to_entries(deliveries), partition=partition, epoch=0)
    assert isinstance(refused, Refused) and f"(partition {partition} of 16) is no longer at" in refused.reason
    await consumer.stop()


async def test_runners_of_partitions_follow_a_rebuild_to_its_generation_and_divide_its_checkpoints(
    claim_log: ClaimLog, engine: Engine, generations: Generations, settings: Settings
):
    claims = await publish_claims(claim_log)
    stop = asyncio.Event()
    live = [half(claim_log, engine, k, generations=generations) for k in range(HALVES)]
    running = [asyncio.create_task(p.run(stop)) for p in live]
    try:
        active = generations.engine(generations.active_number())
        async with asyncio.timeout(60):
            while not await caught_up(claim_log, active):
                await asyncio.sleep(0.05)
        rebuilt = await rebuild_generation(settings, generations)  # written for the whole log
        for claim_id in claims:
            await append_history(claim_log, claim_id, [attached(claim_id, "after-the-switch")])
        await until(lambda: all(p.generation == rebuilt.generation for p in live))
        async with asyncio.timeout(60):
            while not await caught_up(claim_log, generations.engine(rebuilt.generation)):
                await asyncio.sleep(0.05)
    finally:
        stop.set()
        await asyncio.gather(*running)
    names = [p.name for p in build_projections()]
    partitions = claim_log.layout.partitions
    assert written_for(generations.engine(rebuilt.generation)) == {(name, k, partitions) for name in names for k in range(partitions)}
    full = await rebuild_generation(settings, generations, switch=False)  # checkpoints of the whole log
    with generations.engine(rebuilt.generation).connect() as kept, generations.engine(full.generation).connect() as clean:
        assert without_checkpoints(table_checksums(kept)) == without_checkpoints(table_checksums(clean))


async def test_verify_compares_the_tables_of_runners_of_partitions_with_a_replay(claim_log: ClaimLog, engine: Engine):
    await publish_claims(claim_log)
    await run_halves(claim_log, engine)
    clean = Report()
    await compare_read_models(claim_log, engine, clean)
    assert (clean.ok, clean.tables_at_seq) == (True, await claim_log.head()), clean.findings
    with engine.begin() as conn:  # a count changed behind the runners' back is still found
        conn.execute(update(claim_pages).where(claim_pages.c.claim_id == conn.execute(select(claim_pages.c.claim_id)).scalar()).values(sources_validating=99))
    altered = Report()
    await compare_read_models(claim_log, engine, altered)
    assert [f.table for f in altered.findings] == ["claim_pages"]


def test_writers_of_another_number_of_partitions_claiming_at_once_divide_the_checkpoints_once(engine: Engine):
    projections = build_projections()
    with engine.begin() as conn:  # one projector's rows, standing at 42
        conn.execute(insert(checkpoints), [
            {"name": p.name, "partition": 0, "partitions": 1, "version": p.version, "last_seq": 42} for p in projections
        ])
    partitions = 8
    writers = [CheckpointedWriter(engine, projections, partitions=partitions) for _ in range(partitions)]
    start = threading.Barrier(partitions)

    def claim(k: int) -> int | Refused:
        start.wait()
        return writers[k].claim(k, epoch=1)

    with ThreadPoolExecutor(partitions) as pool:
        claimed = list(pool.map(claim, range(partitions)))
    assert claimed == [42] * partitions
