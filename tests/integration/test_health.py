"""Live and ready, against a real nats-server, on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine, create_engine

from services.log import ClaimLog, StreamSpec, connect
from services.read_api.api_state import api_state
from services.read_api.guards import Guards
from tests.builders import drafted
from tests.conftest import random_claim_id
from tests.integration.guarded_api import guarded_api


async def append_drafts(claim_log: ClaimLog, count: int) -> int:
    """Draft ``count`` new claims straight into the log; the head after them."""
    for _ in range(count):
        claim = random_claim_id()
        await claim_log.append(claim, [drafted(claim)], expected_seq=0, prev_hash=None)
    return await claim_log.head()


async def test_ready_means_every_projection_is_within_the_configured_lag(claim_log: ClaimLog, engine: Engine):
    async for guarded in guarded_api(claim_log, engine, Guards(ready_max_lag_events=3)):
        http = guarded.api.http
        head = await append_drafts(claim_log, 3)
        within = await http.get("/health/ready")
        assert within.status_code == 200, within.text
        assert within.json()["projections"]["claim_pages"] == {"last_seq": 0, "lag_events": head}

        head = await append_drafts(claim_log, 2)
        behind = await http.get("/health/ready")
        assert behind.status_code == 503
        body = behind.json()
        assert body["status"] == "not_ready" and body["head"] == head and body["max_lag_events"] == 3
        assert f"projection 'claim_pages' is {head} events behind the log (limit 3)" in body["problems"]
        assert f"projection 'contributors' is {head} events behind the log (limit 3)" in body["problems"]
        assert (await http.get("/health/live")).status_code == 200
        assert (await http.get("/health")).status_code == 200  # /health answers as before: readable

        await guarded.project()
        caught_up = await http.get("/health/ready")
        assert caught_up.status_code == 200 and caught_up.json()["status"] == "ready"
        assert caught_up.json()["projections"]["contributors"] == {"last_seq": head, "lag_events": 0}
        assert (await http.get("/health")).json()["projections"] == {"claim_pages": head, "contributors": head}


async def test_unreadable_read_models_are_not_ready_but_the_process_is_live(
    claim_log: ClaimLog, engine: Engine, tmp_path: Path
):
    async for guarded in guarded_api(claim_log, engine):
        api_state(guarded.app).reads.engine = create_engine(f"sqlite:///{tmp_path / 'no-such-dir' / 'gone.sqlite3'}")
        http = guarded.api.http
        live = await http.get("/health/live")
        assert live.status_code == 200 and live.json() == {"status": "live"}
        ready = await http.get("/health/ready")
        assert ready.status_code == 503 and ready.json()["database"] == "unavailable"
        assert "the read models cannot be read" in ready.json()["problems"][0]
        assert (await http.get("/health")).status_code == 503
        assert (await guarded.metrics())[("claimlog_read_models_up", ())] == 0


async def test_an_unreachable_log_is_not_ready_and_no_log_at_all_is_said(nats_url: str, engine: Engine):
    nc = await connect(nats_url)
    lost = ClaimLog(nc, StreamSpec("CLAIMS"))
    await lost.ensure()
    async for guarded in guarded_api(lost, engine):
        await nc.close()
        unreachable = await guarded.api.http.get("/health/ready")
        assert unreachable.status_code == 503
        assert "reading the head of the log failed" in unreachable.json()["problems"][0]

    async for guarded in guarded_api(None, engine):  # an API started without the log cannot know the head
        unknown = await guarded.api.http.get("/health/ready")
        assert unknown.status_code == 200
        body = unknown.json()
        assert body["head"] is None and body["lag_checked"] is False
        assert body["head_unknown"] == "the API has no connection to the log, so the head of the log is unknown"
        assert body["projections"]["claim_pages"] == {"last_seq": 0, "lag_events": None}
