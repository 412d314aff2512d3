"""A rebuild worker's write-behind page cache writes the same tables as the live, write-every-batch fold."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine, select

import projections.claim_pages as claim_pages_module
from projections.base import Record
from projections.claim_pages import ClaimPagesProjection
from projections.tables import claim_pages
from services.db import make_engine, upgrade
from tests.builders import history
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


def test_write_behind_with_a_cache_smaller_than_the_claims_writes_the_same_pages(two_databases, monkeypatch):
    monkeypatch.setattr(claim_pages_module, "CACHE_PAGES", 3)  # pages leave the cache, dirty, all the time
    log = records()
    live, behind = two_databases

    expected = fold(live, log, ClaimPagesProjection(), batch=5)
    got = fold(behind, log, ClaimPagesProjection(write_behind=True), batch=5)

    assert len(expected) == 8 and got == expected


def test_a_write_behind_fold_that_loses_a_batch_refuses_to_go_on(two_databases):
    projection = ClaimPagesProjection(write_behind=True)
    with two_databases[1].begin() as conn:
        projection.apply_batch(conn, records()[:5])
    with pytest.raises(RuntimeError, match="start the rebuild again"):
        projection.forget()
