"""`claimlog replay --projection NAME`: one projection folded from the first event, the others' tables copied
from the active generation, then all caught up together; what a partial rebuild cannot agree on, a
full one does instead."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import Engine, select, update

from projections.checksum import table_checksums
from projections.contributors import ContributorsProjection
from projections.registry import build_projections
from projections.tables import checkpoints, claim_pages, contributor_activity
from services.log import ClaimLog
from services.projector.parking import parked_rows
from services.read_api.listing_sql import ClaimFilters, claim_listing
from services.rebuild.replay import rebuild_generation, rebuild_if_stale
from services.runtime.settings import Settings
from services.store.generations import Generations
from tests.builders import corrected
from tests.conftest import random_claim_id
from tests.integration.live_projection import assert_equals_a_full_rebuild, live_projector, until
from tests.integration.test_parking import poison
from tests.integration.test_projector import append_history, project_all

CONTRIBUTORS = [t.name for t in ContributorsProjection.tables]


async def live_tables_built_by_other_code(claim_log: ClaimLog, engine: Engine) -> tuple[list[str], str]:
    """Claims projected into the active generation, then both projections' tables altered as other code
    would have left them; more events follow, which the active tables have not seen. Returns the claims
    and the one whose page was altered."""
    claims = [random_claim_id() for _ in range(5)]
    for claim_id in claims[:4]:
        await append_history(claim_log, claim_id)
    await project_all(claim_log, engine)
    altered = claims[0]
    with engine.begin() as conn:
        row = claim_pages.c.claim_id == altered
        doc = json.loads(conn.execute(select(claim_pages.c.doc).where(row)).scalar_one())
        conn.execute(update(claim_pages).where(row).values(doc=json.dumps({**doc, "revision": doc["revision"] + 5})))
        conn.execute(contributor_activity.delete().where(contributor_activity.c.claim_id == claims[1]))
    await append_history(claim_log, claims[4])
    return claims, altered


def page_doc(engine: Engine, claim_id: str) -> dict:
    with engine.connect() as conn:
        return json.loads(conn.execute(select(claim_pages.c.doc).where(claim_pages.c.claim_id == claim_id)).scalar_one())


async def test_one_projection_is_folded_again_and_the_others_are_copied_as_they_stand(
    claim_log: ClaimLog, engine: Engine, generations: Generations, settings: Settings
):
    claims, altered = await live_tables_built_by_other_code(claim_log, engine)

    rebuilt = await rebuild_generation(settings, generations, projections=["contributors"])

    head = await claim_log.head()
    new = generations.engine(rebuilt.generation)
    assert rebuilt.folded == ("contributors",) and rebuilt.applied_through == head
    assert generations.active_number() == rebuilt.generation
    full = await rebuild_generation(settings, generations, switch=False)
    with new.connect() as partial, generations.engine(full.generation).connect() as clean:
        ours, theirs = table_checksums(partial), table_checksums(clean)
        assert {t: ours[t] for t in CONTRIBUTORS} == {t: theirs[t] for t in CONTRIBUTORS}  # folded again: right
        assert ours["claim_pages"] != theirs["claim_pages"]  # copied: as the active tables had it
        assert set(partial.execute(select(checkpoints.c.last_seq)).scalars()) == {head}
        found = claim_listing(partial, ClaimFilters(q="statement"), sort="relevance", after=None, limit=50)
    assert page_doc(new, altered)["revision"] == page_doc(engine, altered)["revision"]
    assert page_doc(new, claims[4])["statement"] == f"Statement of {claims[4]}."  # caught up after the copy
    assert sorted(row["claim_id"] for row in found) == sorted(claims)  # the copied pages are searchable


async def test_a_version_change_rebuilds_only_the_projection_whose_code_changed(
    claim_log: ClaimLog, engine: Engine, generations: Generations, settings: Settings, monkeypatch: pytest.MonkeyPatch
):
    _, altered = await live_tables_built_by_other_code(claim_log, engine)
    monkeypatch.setattr(ContributorsProjection, "version", ContributorsProjection.version + 1)

    rebuilt = await rebuild_if_stale(settings, generations)

    assert rebuilt is not None and rebuilt.folded == ("contributors",)
    new = generations.engine(rebuilt.generation)
    with new.connect() as conn:
        versions = dict(conn.execute(select(checkpoints.c.name, checkpoints.c.version)).all())
    assert versions == {p.name: p.version for p in build_projections()}
    assert page_doc(new, altered)["revision"] == page_doc(engine, altered)["revision"]
    assert await rebuild_if_stale(settings, generations) is None


async def test_a_claim_parked_by_a_projection_left_out_makes_it_a_full_rebuild(
    claim_log: ClaimLog, engine: Engine, generations: Generations, settings: Settings, monkeypatch: pytest.MonkeyPatch
):
    poisoned = random_claim_id()
    await append_history(claim_log, random_claim_id())
    await append_history(claim_log, poisoned)
    poison(monkeypatch, poisoned)  # the claim-page fold raises on its withdrawal: the claim is parked
    await project_all(claim_log, engine)
    with engine.connect() as conn:
        parked = parked_rows(conn)
    assert parked and {row["claim_id"] for row in parked} == {poisoned}

    rebuilt = await rebuild_generation(settings, generations, projections=["contributors"])

    assert rebuilt.folded == ("claim_pages", "contributors")  # contributors alone would have parked nothing
    with generations.engine(rebuilt.generation).connect() as conn:
        assert [(r["seq"], r["reason"]) for r in parked_rows(conn)] == [(r["seq"], r["reason"]) for r in parked]
    assert [g.state for g in generations.list()] == ["retired", "dropped", "active"]


def test_an_unknown_projection_is_refused_before_anything_is_built(tmp_path: Path):
    done = subprocess.run(
        [sys.executable, "-m", "services.cli", "replay", "--projection", "claim-pages"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path, env={"COLUMNS": "250", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 2, done.stderr
    assert "no projection claim-pages; the projections are claim_pages, contributors" in " ".join(done.stderr.split())
    assert not (tmp_path / ".claimlog").exists()


async def test_the_copy_is_one_moment_of_tables_a_live_projector_keeps_writing(
    claim_log: ClaimLog, engine: Engine, generations: Generations, settings: Settings
):
    claims = [random_claim_id() for _ in range(20)]

    async def keep_writing() -> None:
        for i in range(40):
            # A correction counts once more each time it is applied: copied rows and a checkpoint from two
            # different moments would count some twice.
            claim_id = claims[i % len(claims)]
            await append_history(claim_log, claim_id, [corrected(claim_id, "s1", measured=f"Remeasured {i}.")])
            await asyncio.sleep(0.01)  # spread the writes over the copy

    async with live_projector(claim_log, generations, claims, batch=10) as live:
        before = await claim_log.head()
        writer = asyncio.create_task(keep_writing())
        await until(lambda: live.checkpoint > before)  # the copy starts while corrections are folded live
        rebuilt = await rebuild_generation(settings, generations, projections=["claim_pages"])
        await writer
        head = await claim_log.head()
        await until(lambda: live.generation == rebuilt.generation and live.checkpoint >= head)

    await assert_equals_a_full_rebuild(settings, generations, rebuilt.generation)
