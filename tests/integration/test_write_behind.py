"""A rebuild worker's write-behind page cache writes the same tables as the live, write-every-batch fold."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine, select

import projections.claim_pages as claim_pages_module
from projections.base import Record
from projections.claim_pages import ClaimPagesProjection
from projections.contributors import ContributorsProjection
from projections.tables import claim_pages
from services.runtime.db import make_engine, upgrade
from tests.builders import PERSON, attached, history
from tests.conftest import at, random_claim_id


def records() -> list[Record]:
    """Eight claims' histories, interleaved event by event, in log order."""
    histories = [history(random_claim_id()) for _ in range(8)]
    interleaved = [events[i] for i in range(max(map(len, histories))) for events in histories if i < len(events)]
    return [Record(seq, at(seq % 60), event) for seq, event in enumerate(interleaved, 1)]


def fold(engine: Engine, log: list[Record], projection: ClaimPagesProjection, batch: int) -> list[tuple]:
    for start in range(0, len(log), batch):
        with engine.begin() as conn:
            projection.apply_batch(conn, log[start : start + batch])
    if hasattr(projection, "flush"):
        with engine.begin() as conn:
            projection.flush(conn)
    with engine.connect() as conn:
        return conn.execute(select(claim_pages).order_by(claim_pages.c.claim_id)).all()


@pytest.fixture
def two_databases(tmp_path: Path):
    engines = [make_engine(f"sqlite:///{tmp_path / f'{name}.sqlite3'}") for name in ("live", "behind")]
    for engine in engines:
        upgrade(engine)
    yield engines
    for engine in engines:
        engine.dispose()


def test_write_behind_with_a_cache_smaller_than_the_claims_writes_the_same_pages(two_databases):
    log = records()
    live, behind = two_databases
    small = ClaimPagesProjection(write_behind=True, cache_pages=3)  # pages leave the cache, dirty, all the time

    expected = fold(live, log, ClaimPagesProjection(cache_pages=3), batch=5)
    got = fold(behind, log, small, batch=5)

    assert len(expected) == 8 and got == expected
    assert len(small._cache) <= 3


def test_a_rebuild_workers_cache_is_bounded_below_the_live_one():
    assert claim_pages_module.WRITE_BEHIND_PAGES < claim_pages_module.CACHE_PAGES
    assert ClaimPagesProjection(write_behind=True)._cache_pages == claim_pages_module.WRITE_BEHIND_PAGES


def test_a_write_behind_fold_that_loses_a_batch_refuses_to_go_on(two_databases):
    projection = ClaimPagesProjection(write_behind=True)
    with two_databases[1].begin() as conn:
        projection.apply_batch(conn, records()[:5])
    with pytest.raises(RuntimeError, match="start the rebuild again"):
        projection.forget()


def contributor_rows(engine: Engine) -> dict[str, list[tuple]]:
    with engine.connect() as conn:
        return {t.name: conn.execute(select(t).order_by(*t.primary_key.columns)).all() for t in ContributorsProjection.tables}


def test_contributors_in_bulk_write_the_same_rows_as_writing_through(engine: Engine, replay_engine: Engine):
    """A rebuild worker's contributors fold (COPY on PostgreSQL for what a batch creates) writes what the live one does."""
    log = records()
    for target, projection in ((engine, ContributorsProjection()), (replay_engine, ContributorsProjection(bulk=True))):
        for start in range(0, len(log), 7):
            with target.begin() as conn:
                projection.apply_batch(conn, log[start : start + 7])
    expected = contributor_rows(engine)
    assert sum(map(len, expected.values())) > len(log) and contributor_rows(replay_engine) == expected


def test_a_second_attach_of_a_source_in_a_later_batch_keeps_the_first_row_in_a_bulk_fold(engine: Engine):
    """A source attached again in a later batch keeps the row of its first attach, as the page keeps the
    first: the batch reads every source it names before writing, so COPY on PostgreSQL never gets it twice."""
    claim_id = random_claim_id()
    first = [Record(seq, at(seq), event) for seq, event in enumerate(history(claim_id)[:3], 1)]
    again = [Record(10, at(10), attached(claim_id, "s1", "supports", actor=PERSON))]
    projection = ContributorsProjection(bulk=True)
    with engine.begin() as conn:
        projection.apply_batch(conn, first)
    with engine.begin() as conn:
        projection.apply_batch(conn, again)
    [row] = [r for r in contributor_rows(engine)["contributor_sources"] if r.source_id == "s1"]
    assert (row.brought_by, row.relation) == (first[1].event.actor.id, "validates")
    assert row.brought_by != PERSON.id
