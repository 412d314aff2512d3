"""GET /metrics against a real nats-server, on SQLite and PostgreSQL: what Prometheus reads is what happened."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator

import nats
import pytest
from sqlalchemy import Engine, text

from services.log import ClaimLog
from tests.conftest import random_claim_id
from tests.integration.command_api import draft
from tests.integration.guarded_api import Guarded, guarded_api, projection

PROJECTIONS = ("claim_pages", "contributors")


@pytest.fixture
async def guarded(claim_log: ClaimLog, engine: Engine) -> AsyncIterator[Guarded]:
    async for running in guarded_api(claim_log, engine):
        yield running


async def test_each_projection_reports_its_checkpoint_and_its_lag_behind_the_head(guarded: Guarded):
    claim = random_claim_id()
    assert (await guarded.api.send("draft_claim", "ada", **draft(claim))).status_code == 201
    for n in range(4):
        body = {"claim_id": claim, "source_id": f"s{n}", "relation": "supports", "measured": "+1."}
        assert (await guarded.api.send("attach_source", "bot", **body)).status_code == 201
    head = await guarded.api.log.head()

    behind = await guarded.metrics()  # nothing projected yet: every event of the log is lag
    assert behind[("claimlog_log_head_known", ())] == 1 and behind[("claimlog_log_head_seq", ())] == head
    for name in PROJECTIONS:
        assert behind[("claimlog_projection_last_applied_seq", projection(name))] == 0
        assert behind[("claimlog_projection_lag_events", projection(name))] == head
        assert behind[("claimlog_projection_lag_seconds", projection(name))] >= 0
        assert math.isnan(behind[("claimlog_projection_events_applied_per_second", projection(name))])

    await guarded.project()
    caught_up = await guarded.metrics()
    for name in PROJECTIONS:
        assert caught_up[("claimlog_projection_last_applied_seq", projection(name))] == head
        assert caught_up[("claimlog_projection_lag_events", projection(name))] == 0
        assert caught_up[("claimlog_projection_lag_seconds", projection(name))] == 0
        # The checkpoint moved by `head` sequences between the two scrapes: a positive rate.
        assert caught_up[("claimlog_projection_events_applied_per_second", projection(name))] > 0


async def test_unreadable_and_parked_events_are_counted(guarded: Guarded, nats_url: str, engine: Engine):
    claim = random_claim_id()
    raw = await nats.connect(nats_url)
    try:
        for junk in (b"\xff{not json", b'{"type": "ClaimTeleported"}'):
            await raw.jetstream().publish(f"claims.{claim}.ClaimDrafted", junk)
    finally:
        await raw.close()
    await guarded.project()
    with engine.begin() as conn:  # parked_events is another module's table: count whatever rows it has
        conn.execute(text("DROP TABLE IF EXISTS parked_events"))
    without_table = await guarded.metrics()
    assert without_table[("claimlog_unreadable_events", ())] == 2
    assert without_table[("claimlog_parked_events", ())] == 0
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE parked_events (seq BIGINT PRIMARY KEY)"))
        conn.execute(text("INSERT INTO parked_events (seq) VALUES (7), (8), (9)"))
    assert (await guarded.metrics())[("claimlog_parked_events", ())] == 3


async def test_command_requests_are_counted_by_command_and_status_with_their_latencies(guarded: Guarded):
    claim = random_claim_id()
    api = guarded.api
    assert (await api.send("draft_claim", "ada", **draft(claim))).status_code == 201
    body = {"claim_id": claim, "source_id": "s1", "relation": "supports", "measured": "+1."}
    assert (await api.send("attach_source", "bot", **body)).status_code == 201
    assert (await api.send("attach_source", "bot", **{**body, "source_id": "s2"})).status_code == 201
    assert (await api.send("attach_source", None, **body)).status_code == 401
    missing = {**body, "claim_id": random_claim_id()}
    assert (await api.send("attach_source", "bot", **missing)).status_code == 404
    generic = {"command": "withdraw_source", "claim_id": claim, "source_id": "s1", "reason": "Wrong paper."}
    headers = {"Authorization": f"Bearer {api.tokens['ada']}"}
    assert (await api.http.post("/commands", json=generic, headers=headers)).status_code == 201
    for made_up in ("/commands/launch_rockets", "/commands/attach_source/extra", "/commands/x?y=1"):
        assert (await api.http.post(made_up, json={}, headers=headers)).status_code in (404, 405)

    found = await guarded.metrics()
    counts = {
        labels: value for (name, labels), value in found.items() if name == "claimlog_command_requests_total"
    }
    assert counts == {
        (("command", "draft_claim"), ("status", "201")): 1,
        (("command", "attach_source"), ("status", "201")): 2,
        (("command", "attach_source"), ("status", "401")): 1,
        (("command", "attach_source"), ("status", "404")): 1,
        (("command", "any"), ("status", "201")): 1,
        (("command", "unknown"), ("status", "404")): 3,  # made-up paths share one label
    }
    assert found[("claimlog_command_request_duration_seconds_count", (("command", "attach_source"),))] == 4
    assert found[("claimlog_command_request_duration_seconds_sum", (("command", "attach_source"),))] > 0
    assert found[("claimlog_command_request_duration_seconds_bucket", (("command", "attach_source"), ("le", "+Inf")))] == 4
    assert (await api.http.get(f"/claims/{claim}")).status_code in (200, 404)  # reads are not commands
    again = await guarded.metrics()
    assert {k: v for k, v in again.items() if k[0] == "claimlog_command_requests_total"} == {
        (name, labels): value for labels, value in counts.items() for name in ["claimlog_command_requests_total"]
    }


async def test_without_a_connection_to_the_log_the_metrics_say_the_head_is_unknown(engine: Engine):
    async for guarded in guarded_api(None, engine):
        response = await guarded.api.http.get("/metrics")
        found = await guarded.metrics()
    assert found[("claimlog_log_head_known", ())] == 0
    assert "Now 0: the API has no connection to the log" in response.text
    assert not any(name.startswith("claimlog_projection_lag") for name, _ in found)
    assert found[("claimlog_projection_last_applied_seq", projection("claim_pages"))] == 0
