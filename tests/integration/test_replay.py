"""`claimlog replay`: a new generation built from the log while the API keeps serving, then one switch."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import threading
from collections import Counter
from pathlib import Path

import httpx
import nats
import pytest
import uvicorn
from sqlalchemy import Connection, Engine, inspect, select, text, update

from events.subjects import DEFAULT_LAYOUT
from projections.checksum import table_checksums
from projections.registry import build_projections
from projections.tables import checkpoints, claim_pages, unreadable_events
from services.http.server import build_app
from services.log import ClaimLog
from services.read_api.api_state import api_state
from services.read_api.listing_sql import ClaimFilters, claim_listing
from services.rebuild.replay import rebuild_generation, rebuild_if_stale, stale_projections
from services.runtime.settings import Settings
from services.store.generations import Generations
from tests.builders import attached, history, reviewed
from tests.conftest import random_claim_id
from tests.integration.live_projection import assert_equals_a_full_rebuild, live_projector, until
from tests.integration.test_projector import append_history, project_all


async def test_a_replay_builds_equal_tables_and_switches_to_them(
    claim_log: ClaimLog, engine: Engine, generations: Generations, settings: Settings
):
    for _ in range(5):
        await append_history(claim_log, random_claim_id())
    await project_all(claim_log, engine)
    seen: list[tuple[int, int]] = []

    rebuilt = await rebuild_generation(settings, generations, diff=True, progress=lambda a, h: seen.append((a, h)))

    head = await claim_log.head()
    assert (rebuilt.generation, rebuilt.replaced, rebuilt.applied_through) == (1, 0, head)
    assert rebuilt.diff is not None and rebuilt.diff.empty, rebuilt.diff
    assert seen[-1] == (head, head)
    assert generations.active_number() == 1
    with engine.connect() as old, generations.engine(1).connect() as new:
        assert table_checksums(old) == table_checksums(new)
    assert [(g.number, g.state) for g in generations.list()] == [(0, "retired"), (1, "active")]

    assert generations.drop_retired() == [0]
    with engine.connect() as old:
        assert old.execute(claim_pages.select()).first() is None
    assert [(g.number, g.state) for g in generations.list()] == [(0, "dropped"), (1, "active")]


async def test_the_diff_names_the_claims_and_fields_a_code_change_alters(
    claim_log: ClaimLog, engine: Engine, generations: Generations, settings: Settings
):
    claim_id = random_claim_id()
    await append_history(claim_log, claim_id)
    await project_all(claim_log, engine)
    with engine.begin() as conn:  # what tables built by other code would hold
        row = claim_pages.c.claim_id == claim_id
        doc = json.loads(conn.execute(select(claim_pages.c.doc).where(row)).scalar_one())
        conn.execute(update(claim_pages).where(row).values(doc=json.dumps({**doc, "revision": doc["revision"] + 5})))

    rebuilt = await rebuild_generation(settings, generations, switch=False, diff=True)

    assert rebuilt.replaced is None and generations.active_number() == 0
    assert rebuilt.diff.tables_differing == ["claim_pages"]
    assert rebuilt.diff.claims_changed == [(claim_id, ["revision"])]


async def test_a_projection_version_change_is_noticed(engine: Engine, claim_log: ClaimLog):
    await append_history(claim_log, random_claim_id())
    await project_all(claim_log, engine)
    assert stale_projections(engine) == {}
    with engine.begin() as conn:
        conn.execute(update(checkpoints).where(checkpoints.c.name == "claim_pages").values(version=1))
    declared = {p.name: p.version for p in build_projections()}["claim_pages"]
    assert stale_projections(engine) == {"claim_pages": (1, declared)}


class ApiThread:
    """``claimlog api`` as it runs in production (build_app, uvicorn), on a thread of this process."""

    def __init__(self, settings: Settings, generations: Generations, port: int) -> None:
        self.app = build_app(settings, generations)
        self.server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    async def __aenter__(self) -> ApiThread:
        self.thread.start()
        while not self.server.started:
            await asyncio.sleep(0.02)
        return self

    async def __aexit__(self, *_: object) -> None:
        self.server.should_exit = True
        await asyncio.to_thread(self.thread.join, 10)


async def test_the_api_serves_every_request_while_a_replay_builds_and_switches(
    claim_log: ClaimLog, engine: Engine, generations: Generations, settings: Settings, unused_tcp_port: int
):
    claims = [random_claim_id() for _ in range(30)]
    statuses: Counter[int] = Counter()
    hammering = asyncio.Event()

    async def hammer(base: str) -> None:
        async with httpx.AsyncClient(base_url=base, timeout=10) as client:
            n = 0
            while not hammering.is_set():
                claim_id = claims[n % len(claims)]
                for path in (f"/claims/{claim_id}", f"/claims/{claim_id}/counts", "/claims?limit=5", "/scorecard"):
                    statuses[(await client.get(path)).status_code] += 1
                n += 1

    async def keep_writing() -> None:
        for i in range(20):
            claim_id = claims[i % len(claims)]
            await append_history(claim_log, claim_id, [attached(claim_id, f"x{i}")])
            await asyncio.sleep(0.05)  # spread the writes over the rebuild

    async with live_projector(claim_log, generations, claims, batch=100) as live:
        head = await claim_log.head()
        await until(lambda: live.checkpoint == head)
        async with ApiThread(settings, generations, unused_tcp_port) as api:
            base = f"http://127.0.0.1:{unused_tcp_port}"
            hammers = [asyncio.create_task(hammer(base)) for _ in range(3)]
            writer = asyncio.create_task(keep_writing())
            # The rebuild starts while reads are answered and new events are folded live.
            await until(lambda: sum(statuses.values()) >= 20 and live.checkpoint > head)
            rebuilt = await rebuild_generation(settings, generations)
            await writer
            await until(lambda: api_state(api.app).reads.generation == rebuilt.generation and live.generation == rebuilt.generation)
            # After the switch the projector keeps the new tables live: a new event shows there.
            claim_id = claims[0]
            appended = await append_history(claim_log, claim_id, [reviewed(claim_id, "late")])
            async with httpx.AsyncClient(base_url=base) as client:
                page = (await client.get(f"/claims/{claim_id}", params={"after": appended.last_seq})).json()
            switched = sum(statuses.values())
            await until(lambda: sum(statuses.values()) >= switched + 20)  # reads go on after the switch
            hammering.set()
            await asyncio.gather(*hammers)

    assert set(statuses) == {200}, statuses  # every read before, during and after the switch
    assert rebuilt.replaced == 0 and live.generation == rebuilt.generation
    assert page["as_of_seq"] == appended.last_seq and any(r["review_id"] == "late" for r in page["reviews"])
    # What the projector kept live after the switch equals another clean rebuild of the whole log.
    await assert_equals_a_full_rebuild(settings, generations, rebuilt.generation)


async def test_a_projector_starting_on_tables_of_an_older_projection_version_rebuilds_them(
    claim_log: ClaimLog, engine: Engine, generations: Generations, settings: Settings, monkeypatch: pytest.MonkeyPatch
):
    claim_id = random_claim_id()
    await append_history(claim_log, claim_id)
    await project_all(claim_log, engine)
    assert await rebuild_if_stale(settings, generations) is None  # same code: nothing to do

    from projections.claim_pages import ClaimPagesProjection

    monkeypatch.setattr(ClaimPagesProjection, "version", ClaimPagesProjection.version + 1)
    rebuilt = await rebuild_if_stale(settings, generations)

    assert rebuilt is not None and generations.active_number() == rebuilt.generation == 1
    with generations.engine(1).connect() as conn:
        versions = dict(conn.execute(select(checkpoints.c.name, checkpoints.c.version)).all())
        assert conn.execute(select(claim_pages.c.claim_id)).scalars().all() == [claim_id]
    assert versions["claim_pages"] == ClaimPagesProjection.version
    assert stale_projections(generations.engine(1)) == {}


async def test_a_parallel_rebuild_by_partitions_equals_the_live_tables(
    nats_url: str, claim_log: ClaimLog, engine: Engine, generations: Generations, settings: Settings
):
    claims = [random_claim_id() for _ in range(12)]
    for claim_id in claims:  # interleaved: every claim's history appended a few events at a time
        await append_history(claim_log, claim_id, history(claim_id)[:3])
    for claim_id in claims:
        await append_history(claim_log, claim_id, history(claim_id)[3:])
    raw = await nats.connect(nats_url)  # and an event no projection can read, published around the API
    await raw.jetstream().publish(f"claims.{claims[0]}.ClaimDrafted", b"not an event")
    await raw.close()
    await project_all(claim_log, engine)

    rebuilt = await rebuild_generation(settings, generations, workers=3, parallel_from=0)

    assert rebuilt.applied_through == await claim_log.head()
    with engine.connect() as live, generations.engine(rebuilt.generation).connect() as rebuilt_tables:
        assert table_checksums(live) == table_checksums(rebuilt_tables)
        assert rebuilt_tables.execute(select(unreadable_events.c.subject)).scalars().all() == [DEFAULT_LAYOUT.stored_subject(claims[0], "ClaimDrafted")]
        # Built without secondary indexes and search triggers, then given them back: the same schema,
        # and search finds what the live tables find (the statement index was filled in one pass).
        assert schema_objects(rebuilt_tables) == schema_objects(live)
        word = next(w for w in live.execute(select(claim_pages.c.statement)).scalar().split() if len(w) > 4)
        found = {r["claim_id"] for r in claim_listing(live, ClaimFilters(q=word), sort="id", after=None, limit=50)}
        assert found and {
            r["claim_id"] for r in claim_listing(rebuilt_tables, ClaimFilters(q=word), sort="id", after=None, limit=50)
        } == found
    leftovers = [p.name for p in Path(settings.data_dir).parent.rglob("*.p[0-9]*")]
    assert leftovers == []
    if generations.dialect == "sqlite":  # built without the write-ahead log, then given it back for readers
        with contextlib.closing(sqlite3.connect(generations.location(rebuilt.generation))) as raw:
            assert raw.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def schema_objects(conn: Connection) -> dict[str, list[str]]:
    """Every read-model table's indexes, and the triggers on the claim pages."""
    inspector = inspect(conn)
    objects = {t: sorted(i["name"] for i in inspector.get_indexes(t)) for t in inspector.get_table_names()}
    if conn.dialect.name == "sqlite":
        query = "SELECT name FROM sqlite_master WHERE type = 'trigger' ORDER BY name"
    else:
        query = "SELECT tgname FROM pg_trigger WHERE tgrelid = 'claim_pages'::regclass AND NOT tgisinternal ORDER BY tgname"
    objects["triggers"] = list(conn.execute(text(query)).scalars())
    return objects


class _UnusablePlaces(Generations):
    """Gives every rebuild worker but the first a place it cannot open."""

    def partition(self, number: int, part: int) -> tuple[str, str | None]:
        return "sqlite:////proc/claimlog-no-such-directory/share.db", None


async def test_a_failed_rebuild_worker_fails_the_rebuild_by_name_and_the_active_generation_stays(
    claim_log: ClaimLog, engine: Engine, settings: Settings
):
    for _ in range(3):
        await append_history(claim_log, random_claim_id())
    await project_all(claim_log, engine)
    generations = _UnusablePlaces(settings.resolved_database_url())
    try:
        with pytest.raises(RuntimeError, match=r"^replay worker claimlog-replay-p1 \(exit code 1\) failed;"):
            await rebuild_generation(settings, generations, workers=2, parallel_from=0)
        assert generations.active_number() == 0
        assert [(g.number, g.state) for g in generations.list()] == [(0, "active"), (1, "dropped")]
    finally:
        generations.close()
