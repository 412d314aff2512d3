"""Shares of the claims on one database (SQLite and PostgreSQL): projectors folding the claims whose
id hashes to them while reading the whole log, side by side in one process, and the checkpoints they
leave levelled and divided anew (services/projector/shares.py, services/projector/positions.py).
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import nats.js.errors
import pytest
from sqlalchemy import Engine, insert, select, update

from projections.checksum import table_checksums
from projections.registry import build_projections
from projections.tables import checkpoints, claim_pages
from services.audit.rebuild import compare_read_models
from services.audit.verify import Report
from services.log import ClaimLog
from services.projector import Projector
from services.projector.runner import claim_partition, to_entries
from services.projector.shares import consumer_name, level
from services.projector.writer import CheckpointedWriter, Refused
from services.read_api.queries import positions
from services.rebuild.replay import rebuild_generation
from services.runtime.settings import Settings
from services.store.generations import Generations
from tests.builders import attached, withdrawn
from tests.conftest import random_claim_id
from tests.integration.live_projection import assert_equals_a_full_rebuild, until
from tests.integration.test_projector import append_history, project_all

SHARES = 2


def share(claim_log: ClaimLog, engine: Engine, k: int, n: int = SHARES, *, batch: int = 5) -> Projector:
    return Projector(claim_log, engine, build_projections(), name=consumer_name("projector", k, n), batch=batch, share=(k, n))


async def run_shares(claim_log: ClaimLog, engine: Engine, n: int = SHARES, *, batch: int = 5) -> list[Projector]:
    head = await claim_log.head()
    projectors = [share(claim_log, engine, k, n, batch=batch) for k in range(n)]
    await asyncio.gather(*(p.run_until(head) for p in projectors))
    return projectors


def rows(engine: Engine) -> set[tuple[str, int, int, int]]:
    with engine.connect() as conn:
        found = conn.execute(select(checkpoints.c.name, checkpoints.c.share, checkpoints.c.shares, checkpoints.c.last_seq))
        return {tuple(row) for row in found}


async def publish_claims(claim_log: ClaimLog, count: int = 12) -> list[str]:
    """Claims with whole histories, spread over both shares (more than ``count`` when needed for that)."""
    claims = [random_claim_id() for _ in range(count)]
    while {claim_partition(f"claims.{c}.x", SHARES) for c in claims} != set(range(SHARES)):
        claims.append(random_claim_id())
    for claim_id in claims:
        await append_history(claim_log, claim_id)
    return claims


async def test_shares_folding_side_by_side_build_what_one_projector_builds(
    claim_log: ClaimLog, engine: Engine, replay_engine: Engine
):
    claims = await publish_claims(claim_log)
    await run_shares(claim_log, engine)
    for claim_id in claims:  # and on from there, more events to each share
        await append_history(claim_log, claim_id, [withdrawn(claim_id, "s1"), attached(claim_id, "s9", "qualifies")])
    await run_shares(claim_log, engine)
    await project_all(claim_log, replay_engine, name="replay")
    with engine.connect() as shared, replay_engine.connect() as single:
        assert table_checksums(shared) == table_checksums(single)
    head = await claim_log.head()
    names = [p.name for p in build_projections()]
    assert rows(engine) == {(name, k, SHARES, head) for name in names for k in range(SHARES)}


async def test_reads_wait_for_the_share_that_is_furthest_behind(claim_log: ClaimLog, engine: Engine):
    claims = await publish_claims(claim_log)
    await run_shares(claim_log, engine)
    behind = await claim_log.head()
    for claim_id in claims:
        await append_history(claim_log, claim_id, [attached(claim_id, "late")])
    await share(claim_log, engine, 0).run_until(await claim_log.head())
    with engine.connect() as conn:
        assert set(positions(conn).values()) == {behind}


async def test_another_number_of_shares_divides_the_checkpoints_where_they_stand(
    claim_log: ClaimLog, engine: Engine, replay_engine: Engine
):
    claims = await publish_claims(claim_log)
    await project_all(claim_log, engine)  # one projector
    first = await claim_log.head()
    names = [p.name for p in build_projections()]
    assert rows(engine) == {(name, 0, 1, first) for name in names}
    for claim_id in claims:
        await append_history(claim_log, claim_id, [attached(claim_id, "more")])
    await run_shares(claim_log, engine, 3)  # three shares take over from where it stood
    await project_all(claim_log, replay_engine, name="replay")
    with engine.connect() as shared, replay_engine.connect() as single:
        assert table_checksums(shared) == table_checksums(single)
    assert rows(engine) == {(name, k, 3, await claim_log.head()) for name in names for k in range(3)}


async def test_shares_at_different_positions_are_levelled_before_another_number_runs(
    claim_log: ClaimLog, engine: Engine, replay_engine: Engine
):
    claims = await publish_claims(claim_log)
    await run_shares(claim_log, engine)
    for claim_id in claims:
        await append_history(claim_log, claim_id, [withdrawn(claim_id, "s3")])
    await share(claim_log, engine, 1).run_until(await claim_log.head())  # share 0 stays behind
    with pytest.raises(RuntimeError, match=r"written by 2 shares .* different positions .*`claimlog projector` bring them to one"):
        await project_all(claim_log, engine)
    await level(claim_log, engine, shares=1, name="projector", batch=5)
    for k in range(SHARES):  # nothing reads the old shares' consumers again
        with pytest.raises(nats.js.errors.NotFoundError):
            await claim_log.nc.jetstream().consumer_info(claim_log.stream, consumer_name("projector", k, SHARES))
    await project_all(claim_log, engine)
    await project_all(claim_log, replay_engine, name="replay")
    with engine.connect() as single_again, replay_engine.connect() as single:
        assert table_checksums(single_again) == table_checksums(single)


async def test_a_share_of_a_number_no_longer_running_is_fenced_off(claim_log: ClaimLog, engine: Engine):
    claims = await publish_claims(claim_log)
    await run_shares(claim_log, engine)
    stale = share(claim_log, engine, 0)
    stale.load_checkpoint()
    # One projector takes over where the shares stand (the stale share's checkpoint is still right).
    Projector(claim_log, engine, build_projections(), name="projector", batch=5).load_checkpoint()
    await append_history(claim_log, claims[0], [attached(claims[0], "late")])
    consumer = claim_log.consumer("stale", max_batch=100)
    await consumer.start(stale.checkpoint)
    deliveries = await consumer.next_batch(timeout=5)
    refused = await stale.writer.commit(to_entries(deliveries, share=(0, SHARES)), partition=0, epoch=0)
    assert isinstance(refused, Refused) and "(partition 0 of 2) is no longer at" in refused.reason
    await consumer.stop()


async def test_shares_follow_a_rebuild_to_its_generation_and_divide_its_checkpoints(
    claim_log: ClaimLog, engine: Engine, generations: Generations, settings: Settings
):
    claims = await publish_claims(claim_log)
    stop = asyncio.Event()
    live = [
        Projector(claim_log, engine, build_projections(), name=consumer_name("live", k, SHARES), batch=5, generations=generations, share=(k, SHARES))
        for k in range(SHARES)
    ]
    running = [asyncio.create_task(p.run(stop)) for p in live]
    head = await claim_log.head()
    try:
        await until(lambda: all(p.checkpoint == head for p in live))
        rebuilt = await rebuild_generation(settings, generations)  # written for one process
        for claim_id in claims:
            await append_history(claim_log, claim_id, [attached(claim_id, "after-the-switch")])
        head = await claim_log.head()
        await until(lambda: all(p.generation == rebuilt.generation and p.checkpoint == head for p in live))
    finally:
        stop.set()
        await asyncio.gather(*running)
    names = [p.name for p in build_projections()]
    assert rows(generations.engine(rebuilt.generation)) == {(name, k, SHARES, head) for name in names for k in range(SHARES)}
    await assert_equals_a_full_rebuild(settings, generations, rebuilt.generation)


async def test_verify_compares_the_tables_of_shares_with_a_replay_by_one_process(claim_log: ClaimLog, engine: Engine):
    await publish_claims(claim_log)
    await run_shares(claim_log, engine)
    clean = Report()
    await compare_read_models(claim_log, engine, clean)
    assert (clean.ok, clean.tables_at_seq) == (True, await claim_log.head()), clean.findings
    with engine.begin() as conn:  # a count changed behind the shares' back is still found
        conn.execute(update(claim_pages).where(claim_pages.c.claim_id == conn.execute(select(claim_pages.c.claim_id)).scalar()).values(sources_validating=99))
    altered = Report()
    await compare_read_models(claim_log, engine, altered)
    assert [f.table for f in altered.findings] == ["claim_pages"]


def test_writers_of_another_number_of_partitions_claiming_at_once_divide_the_checkpoints_once(engine: Engine):
    projections = build_projections()
    with engine.begin() as conn:  # one projector's rows, standing at 42
        conn.execute(insert(checkpoints), [
            {"name": p.name, "share": 0, "shares": 1, "version": p.version, "last_seq": 42} for p in projections
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
    assert rows(engine) == {(p.name, k, partitions, 42) for p in projections for k in range(partitions)}
