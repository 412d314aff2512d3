"""The exactly-once writer on its own, on SQLite and on PostgreSQL (one contract suite): a batch and its
partition's checkpoint commit together, duplicates are skipped, a stale owner is refused."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime

import pytest
from sqlalchemy import Engine, select
from sqlalchemy.exc import OperationalError

from events.subjects import LogLayout, claim_of
from projections.base import Record
from projections.checksum import table_checksums
from projections.registry import build_projections
from projections.tables import checkpoints, claim_pages
from services.projector.writer import CheckpointedWriter, Committed, Entry, Refused
from tests.builders import history
from tests.conftest import random_claim_id

AT = datetime(2026, 1, 1, tzinfo=UTC)


def entries_of(claims: list[str], *, first: int = 1) -> list[Entry]:
    """Every claim's whole history as a batch at sequences from ``first``, claim after claim."""
    events = [event for claim_id in claims for event in history(claim_id)]
    return [
        Entry(seq, f"claims.{event.claim_id}.{event.type}", Record(seq, AT, event))
        for seq, event in enumerate(events, start=first)
    ]


def positions(engine: Engine) -> set[tuple[int, int, int]]:
    """(partition, checkpoint, epoch) of every checkpoint row."""
    with engine.connect() as conn:
        return {tuple(row) for row in conn.execute(select(checkpoints.c.partition, checkpoints.c.last_seq, checkpoints.c.epoch))}


def snapshot(engine: Engine) -> tuple[dict, set]:
    with engine.connect() as conn:
        return table_checksums(conn), positions(engine)


async def test_a_batch_committed_again_applies_only_what_is_above_the_checkpoint(engine: Engine, replay_engine: Engine):
    batch = entries_of([random_claim_id(), random_claim_id()])
    writer = CheckpointedWriter(engine, build_projections())
    assert await writer.commit(batch[:5], partition=0, epoch=0) == Committed(checkpoint=5, applied=5, skipped=0)
    again = await writer.commit(batch, partition=0, epoch=0)
    assert again == Committed(checkpoint=len(batch), applied=len(batch) - 5, skipped=5)
    assert await CheckpointedWriter(engine, build_projections()).commit(batch, partition=0, epoch=0) == Committed(len(batch), 0, len(batch))
    await CheckpointedWriter(replay_engine, build_projections()).commit(batch, partition=0, epoch=0)
    with engine.connect() as twice, replay_engine.connect() as once:
        assert table_checksums(twice) == table_checksums(once)


async def test_a_commit_with_an_epoch_below_the_partitions_owner_is_refused_and_writes_nothing(engine: Engine):
    batch = entries_of([random_claim_id()])
    paused = CheckpointedWriter(engine, build_projections(), partitions=2)
    assert await paused.commit(batch[:3], partition=1, epoch=7) == Committed(3, 3, 0)
    successor = CheckpointedWriter(engine, build_projections(), partitions=2)
    assert successor.claim(1, epoch=8) == 3  # takes the partition before it has committed anything
    before = snapshot(engine)
    refused = await paused.commit(batch, partition=1, epoch=7)
    assert isinstance(refused, Refused) and (refused.checkpoint, refused.epoch) == (3, 8)
    assert "owned at epoch 8, above 7" in refused.reason
    assert snapshot(engine) == before
    assert isinstance(CheckpointedWriter(engine, build_projections(), partitions=2).claim(1, epoch=7), Refused)
    assert await successor.commit(batch, partition=1, epoch=8) == Committed(len(batch), len(batch) - 3, 3)
    assert (1, len(batch), 8) in positions(engine)


class FailingProjection:
    """Stands in for a projection whose batch fails as a database going away would."""

    def __init__(self, projection) -> None:
        self.name, self.version, self.tables = projection.name, projection.version, projection.tables

    def apply_batch(self, conn, records) -> None:
        raise OperationalError("INSERT", {}, Exception("injected: the database went away"))

    def forget(self) -> None:
        pass


async def test_a_failure_mid_batch_leaves_the_rows_and_the_checkpoint_as_they_were(engine: Engine):
    batch = entries_of([random_claim_id(), random_claim_id()])
    await CheckpointedWriter(engine, build_projections()).commit(batch[:4], partition=0, epoch=0)
    before = snapshot(engine)
    first, second = build_projections()
    failing = CheckpointedWriter(engine, [first, FailingProjection(second)])
    with pytest.raises(OperationalError, match="injected"):
        await failing.commit(batch, partition=0, epoch=0)
    assert snapshot(engine) == before
    assert await CheckpointedWriter(engine, build_projections()).commit(batch, partition=0, epoch=0) == Committed(len(batch), len(batch) - 4, 4)


async def test_commits_of_two_partitions_at_once_both_land(engine: Engine, replay_engine: Engine):
    claims = [random_claim_id() for _ in range(8)]
    two = LogLayout(partitions=2)  # the server's own hash of a claim id into two partitions
    while len({two.partition_of(claim) for claim in claims}) < 2:
        claims.append(random_claim_id())  # eight random ids all fall in one of two partitions, now and then
    everything = entries_of(claims)
    by_partition = {
        part: [e for e in everything if two.partition_of(claim_of(e.subject)) == part] for part in (0, 1)
    }
    assert all(by_partition.values())
    start = threading.Barrier(2)
    outcomes: dict[int, object] = {}

    def commit_partition(part: int) -> None:
        writer = CheckpointedWriter(engine, build_projections(), partitions=2)
        writer.claim(part, epoch=1)
        start.wait()
        outcomes[part] = asyncio.run(writer.commit(by_partition[part], partition=part, epoch=1))

    await asyncio.gather(*(asyncio.to_thread(commit_partition, part) for part in (0, 1)))
    assert outcomes == {part: Committed(batch[-1].seq, len(batch), 0) for part, batch in by_partition.items()}
    await CheckpointedWriter(replay_engine, build_projections()).commit(everything, partition=0, epoch=0)
    with engine.connect() as apart, replay_engine.connect() as together:
        assert len(apart.execute(select(claim_pages.c.claim_id)).all()) == len(claims)
        assert _without_checkpoints(table_checksums(apart)) == _without_checkpoints(table_checksums(together))


def _without_checkpoints(checksums: dict) -> dict:
    return {table: value for table, value in checksums.items() if table != checkpoints.name}


async def test_a_batch_of_several_partitions_commits_together_and_a_fenced_one_refuses_all_of_it(engine: Engine, replay_engine: Engine):
    # Stored subjects of a partitioned log (claims.<partition>.<claim>.<Type>), each event with its partition.
    claims = [random_claim_id() for _ in range(3)]
    parts = {claim: k for k, claim in enumerate(claims)}
    everything = [
        Entry(e.seq, f"claims.{parts[e.record.event.claim_id]}.{e.record.event.claim_id}.{e.record.event.type}", e.record, parts[e.record.event.claim_id])
        for e in entries_of(claims)
    ]
    last = {k: max(e.seq for e in everything if e.subject.startswith(f"claims.{k}.")) for k in parts.values()}

    def writer() -> CheckpointedWriter:
        return CheckpointedWriter(engine, build_projections(), partitions=4)

    worker = writer()
    half = len(everything) // 2
    assert await worker.commit(everything[:half], owners={0: 3, 1: 3, 2: 3}) == Committed(everything[half - 1].seq, half, 0)
    # Another worker takes partition 2: the next batch, which holds events of partitions 0, 1 and 2, writes nothing.
    successor = writer()
    assert isinstance(successor.claim(2, epoch=5), int)
    before = snapshot(engine)
    refused = await worker.commit(everything, owners={0: 3, 1: 3, 2: 3})
    assert isinstance(refused, Refused) and refused.partition == 2 and "owned at epoch 5, above 3" in refused.reason
    assert snapshot(engine) == before
    # Held at the right epochs, the batch lands: each partition's checkpoint at its own last event,
    # what was committed before skipped.
    again = writer()
    assert await again.commit(everything, owners={0: 3, 1: 3, 2: 5}) == Committed(everything[-1].seq, len(everything) - half, half)
    assert {(k, seq) for k, seq, _ in positions(engine)} == set(last.items())
    await CheckpointedWriter(replay_engine, build_projections()).commit(everything, partition=0, epoch=0)  # one writer of the whole log
    with engine.connect() as apart, replay_engine.connect() as together:
        assert _without_checkpoints(table_checksums(apart)) == _without_checkpoints(table_checksums(together))


async def test_a_batch_of_several_partitions_holding_one_it_does_not_own_is_refused_with_the_reason(engine: Engine):
    # An entry built without its partition must not fold under the checkpoint of partition 0 (or any
    # other) whose owner never saw it; nor one of a partition the commit was not given.
    claim = random_claim_id()
    stored = [Entry(e.seq, f"claims.3.{claim}.{e.record.event.type}", e.record, 3) for e in entries_of([claim])]
    unmarked = [Entry(e.seq, e.subject, e.record) for e in stored]
    worker = CheckpointedWriter(engine, build_projections(), partitions=4)
    before = snapshot(engine)
    for batch, owners, named in ((unmarked, {0: 1, 3: 1}, "None"), (stored, {1: 1, 2: 1}, "3")):
        with pytest.raises(ValueError, match=rf"event 1 \(claims\.3\..*\) is of partition {named}, not one this commit owns"):
            await worker.commit(batch, owners=owners)
    assert snapshot(engine) == before
    assert await worker.commit(stored, owners={1: 1, 3: 1}) == Committed(len(stored), len(stored), 0)
