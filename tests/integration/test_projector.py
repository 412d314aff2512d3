"""The projector against a real nats-server, on SQLite and on PostgreSQL (one contract suite)."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, event, func, select
from sqlalchemy.exc import OperationalError

from events.subjects import DEFAULT_LAYOUT
from projections.base import Record
from projections.checksum import table_checksums
from projections.claim_page import fold
from projections.page_model import PAGE
from projections.registry import build_projections
from projections.tables import claim_pages, contributor_disagreements, contributor_sources, unreadable_events
from services.log import Appended, ClaimLog
from services.projector import FencingError, Projector, Runner, Scope
from services.projector.runner import to_entries
from services.projector.writer import CheckpointedWriter, Committed, Refused
from services.read_api.queries import claim_page
from tests.builders import attached, drafted, filed, history, resolved, withdrawn
from tests.conftest import random_claim_id


async def project_all(claim_log: ClaimLog, engine: Engine, *, batch: int = 1000, name: str = "projector") -> Projector:
    projector = Projector(claim_log, engine, build_projections(), name=name, batch=batch)
    await projector.run_until(await claim_log.head())
    return projector


async def append_history(claim_log: ClaimLog, claim_id: str, events=None) -> Appended:
    """Append ``events`` (the claim's whole history by default) after whatever the claim already has."""
    head = await claim_log.claim_head(claim_id)
    return await claim_log.append(claim_id, events or history(claim_id), expected_seq=head.seq, prev_hash=head.hash)


async def test_the_page_shows_what_the_log_says(claim_log: ClaimLog, engine: Engine, claim_id: str):
    await append_history(claim_log, claim_id)
    await project_all(claim_log, engine)
    with engine.connect() as conn:
        page = claim_page(conn, claim_id)
    assert page.statement == f"Statement of {claim_id}."
    assert [(s.source_id, s.state) for s in page.sources] == [("s1", "active"), ("s2", "withdrawn"), ("s3", "active")]
    assert page.sources[2].measured == "Fixed." and page.sources[2].corrections[0].stamp.by.id == "ada"
    assert page.counts.disagreements_open == 1 and page.counts.disagreements_resolved == 1
    assert page.notes.falsifier_as_drafted == "A replication that finds no effect."
    assert page.notes.falsifier_now == "A new falsifier."
    assert page.as_of_seq == await claim_log.head()


async def test_live_projection_in_small_batches_equals_a_clean_replay(
    claim_log: ClaimLog, engine: Engine, replay_engine: Engine
):
    claims = [random_claim_id() for _ in range(5)]
    for claim_id in claims:
        await append_history(claim_log, claim_id)
        await project_all(claim_log, engine, batch=3)
    for claim_id in claims:
        await append_history(claim_log, claim_id, [withdrawn(claim_id, "s1"), attached(claim_id, "s9", "qualifies")])
    await project_all(claim_log, engine, batch=7)
    await project_all(claim_log, replay_engine, batch=1000, name="replay")
    with engine.connect() as live, replay_engine.connect() as replayed:
        assert table_checksums(live) == table_checksums(replayed)
        assert live.execute(select(func.count()).select_from(claim_pages)).scalar() == 5


async def test_a_source_attached_twice_keeps_its_fate_however_the_log_is_batched(
    claim_log: ClaimLog, engine: Engine, replay_engine: Engine, claim_id: str
):
    """A producer writing to the log directly can attach a source id twice: the page ignores the
    second attach, and so must the contributors' record of that source, whether or not the first
    attach and its withdrawal were applied in an earlier batch."""
    await append_history(claim_log, claim_id, [drafted(claim_id), attached(claim_id, "s1"), filed(claim_id, "d1")])
    await project_all(claim_log, engine)
    await append_history(claim_log, claim_id, [withdrawn(claim_id, "s1"), resolved(claim_id, "d1")])
    await project_all(claim_log, engine)
    await append_history(claim_log, claim_id, [attached(claim_id, "s1", "contradicts"), filed(claim_id, "d1")])
    await project_all(claim_log, engine)
    await project_all(claim_log, replay_engine, name="replay")
    with engine.connect() as live, replay_engine.connect() as replayed:
        assert table_checksums(live) == table_checksums(replayed)
        row = live.execute(select(contributor_sources).where(contributor_sources.c.claim_id == claim_id)).one()
        outcome = live.execute(select(contributor_disagreements.c.outcome).where(contributor_disagreements.c.claim_id == claim_id)).scalar()
    assert (row.relation, row.withdrawn) == ("validates", True)
    assert outcome == "upheld"


async def test_a_redelivered_batch_is_not_applied_twice(claim_log: ClaimLog, engine: Engine, claim_id: str):
    await append_history(claim_log, claim_id)
    projector = await project_all(claim_log, engine)
    with engine.connect() as conn:
        before = table_checksums(conn)
    redelivering = claim_log.consumer("redelivery", max_batch=1000)
    await redelivering.start(0)
    deliveries = await redelivering.next_batch(timeout=5)
    await redelivering.stop()
    assert deliveries and deliveries[0].seq == 1
    committed = await projector.writer.commit(to_entries(deliveries), partition=0, epoch=0)
    assert committed == Committed(checkpoint=projector.checkpoint, applied=0, skipped=len(deliveries))
    with engine.connect() as conn:
        assert table_checksums(conn) == before


async def test_a_batch_whose_commit_fails_is_applied_again_though_nothing_more_arrives(claim_log: ClaimLog, engine: Engine, claim_id: str):
    """A batch is written (in the writer's thread) while the loop waits for the next one: its failure
    must not wait for more events to surface, or the projector would stand still until the next append.
    A failed commit is rolled back where it ran (on PostgreSQL the connection would otherwise go back
    to the pool inside its failed transaction)."""
    appended = await append_history(claim_log, claim_id)
    failed = []

    def note_the_checkpoint_advance(conn, _cursor, statement: str, *_args) -> None:
        if statement.startswith("UPDATE projection_checkpoints"):
            conn.info["advanced"] = True  # only a batch's transaction moves the checkpoint

    def fail_the_first_batch_commit(conn) -> None:
        if conn.info.pop("advanced", False) and not failed:
            failed.append(True)
            raise OperationalError("COMMIT", {}, Exception("injected: the database went away"))

    event.listen(engine, "before_cursor_execute", note_the_checkpoint_advance)
    event.listen(engine, "commit", fail_the_first_batch_commit)
    try:
        projector = Projector(claim_log, engine, build_projections(), name="projector", batch=1000)
        await projector.run_until(appended.last_seq, timeout=20)
    finally:
        event.remove(engine, "commit", fail_the_first_batch_commit)
        event.remove(engine, "before_cursor_execute", note_the_checkpoint_advance)
    assert failed
    with engine.connect() as conn:
        assert claim_page(conn, claim_id).as_of_seq == appended.last_seq


async def test_a_second_projector_writing_the_same_tables_is_fenced_off(claim_log: ClaimLog, engine: Engine, claim_id: str):
    await append_history(claim_log, claim_id, [drafted(claim_id)])
    stale = Projector(claim_log, engine, build_projections(), name="stale", batch=100)
    stale.load_checkpoint()
    await project_all(claim_log, engine)
    await append_history(claim_log, claim_id, [attached(claim_id, "late")])
    consumer = claim_log.consumer("stale", max_batch=100)
    await consumer.start(0)
    deliveries = await consumer.next_batch(timeout=5)
    refused = await stale.writer.commit(to_entries(deliveries), partition=0, epoch=0)
    assert isinstance(refused, Refused) and "another projector is writing" in refused.reason
    await consumer.stop()


async def test_an_unreadable_event_is_recorded_and_later_events_still_project(
    claim_log: ClaimLog, engine: Engine, claim_id: str
):
    await append_history(claim_log, claim_id, [drafted(claim_id)])
    bad = await claim_log.nc.jetstream().publish(f"claims.{claim_id}.ClaimDrafted", b'{"type": "ClaimDrafted"}')
    await append_history(claim_log, claim_id, [attached(claim_id, "after")])
    await project_all(claim_log, engine)
    with engine.connect() as conn:
        rows = conn.execute(select(unreadable_events)).all()
        page = claim_page(conn, claim_id)
    assert [(r.seq, r.subject) for r in rows] == [(bad.seq, DEFAULT_LAYOUT.stored_subject(claim_id, "ClaimDrafted"))]
    assert "invalid ClaimDrafted" in rows[0].reason
    assert [s.source_id for s in page.sources] == ["after"]


async def test_folding_a_claims_own_events_gives_the_projected_page(claim_log: ClaimLog, engine: Engine, claim_id: str):
    await append_history(claim_log, claim_id)
    await project_all(claim_log, engine)
    stored = await claim_log.read_claim(claim_id)
    folded = fold(Record(s.seq, s.stored_at, s.event) for s in stored)
    with engine.connect() as conn:
        projected = claim_page(conn, claim_id)
    assert PAGE.dump_python(projected, mode="json") == PAGE.dump_python(folded, mode="json")


async def test_a_runner_whose_partition_another_owner_took_stops_without_writing(claim_log: ClaimLog, engine: Engine, claim_id: str):
    await append_history(claim_log, claim_id, [drafted(claim_id)])
    assert CheckpointedWriter(engine, build_projections()).claim(0, epoch=5) == 0
    stale = Runner(claim_log, CheckpointedWriter(engine, build_projections()), name="stale", batch=10, epoch=4)
    with pytest.raises(FencingError, match="owned at epoch 5, above 4"):
        await stale.run_until(await claim_log.head(), timeout=20)
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(claim_pages)).scalar() == 0


async def test_runners_of_each_partition_receive_only_its_events_and_together_equal_one_projector(
    claim_log: ClaimLog, engine: Engine, replay_engine: Engine
):
    layout = claim_log.layout
    last_of: dict[int, int] = {}
    for _ in range(6):
        claim_id = random_claim_id()
        appended = await append_history(claim_log, claim_id)
        last_of[layout.partition_of(claim_id)] = appended.last_seq
    assert len(last_of) > 1
    for partition, last in last_of.items():
        writer = CheckpointedWriter(engine, build_projections(), partitions=layout.partitions)
        runner = Runner(claim_log, writer, name=f"p{partition}", batch=4, scope=Scope(partition=partition), epoch=1)
        await runner.run_until(last, timeout=30)
        assert runner.checkpoint == last  # nothing of another partition moved it
    await project_all(claim_log, replay_engine, name="replay")
    with engine.connect() as apart, replay_engine.connect() as together:
        assert _rows(table_checksums(apart)) == _rows(table_checksums(together))


def _rows(checksums: dict) -> dict:
    """Checksums of the read models' tables, without the checkpoints (partitioned here, not there)."""
    return {table: value for table, value in checksums.items() if table != "projection_checkpoints"}
