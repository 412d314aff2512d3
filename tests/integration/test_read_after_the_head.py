"""Read your writes names a sequence: one past the head of the log is refused at once (no write was given
it), one in the log but not yet applied still waits. On a real nats-server, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import time

from sqlalchemy import Engine

from services.log import ClaimLog
from services.read_api.api_state import api_state
from tests.conftest import random_claim_id
from tests.integration.command_api import draft
from tests.integration.guarded_api import guarded_api
from tests.waiting import checkpoint_polls

WAIT = 10.0  # guarded_api's read_wait: a refusal must come long before it


async def test_a_sequence_past_the_head_of_the_log_is_refused_at_once_with_why(claim_log: ClaimLog, engine: Engine):
    async for guarded in guarded_api(claim_log, engine):
        api = guarded.api
        claim = random_claim_id()
        assert (await api.send("draft_claim", "ada", **draft(claim))).status_code == 201
        head = await guarded.project()
        asks = {
            "after": dict(params={"after": head + 1}),
            "Claimlog-After": dict(headers={"Claimlog-After": str(head + 1000)}),
        }
        for named, ask in asks.items():
            for path in (f"/claims/{claim}", "/claims", f"/pages/claims/{claim}", "/scorecard", "/contributors/ada"):
                started = time.monotonic()
                response = await api.http.get(path, **ask)
                took = time.monotonic() - started
                assert response.status_code == 422, (path, named, response.text)
                body = response.json()
                assert body["error"] == "beyond_log_head", body
                target = head + (1 if named == "after" else 1000)
                assert body["message"].startswith(f"{named}={target} is beyond the log's last sequence {head}"), body
                assert took < WAIT / 5, (path, named, took)
        both = await api.http.get("/claims", params={"after": head}, headers={"Claimlog-After": str(head + 7)})
        assert both.status_code == 422 and f"Claimlog-After={head + 7}" in both.json()["message"]
        # The head itself, and anything before it, is answered as before.
        assert (await api.http.get(f"/claims/{claim}", params={"after": head})).status_code == 200


async def test_a_sequence_in_the_log_but_not_yet_applied_still_waits_for_the_projections(
    claim_log: ClaimLog, engine: Engine
):
    async for guarded in guarded_api(claim_log, engine):
        api = guarded.api
        claim = random_claim_id()
        written = await api.send("draft_claim", "ada", **draft(claim))
        seq = written.json()["last_seq"]
        with checkpoint_polls(engine) as polls:
            reading = asyncio.create_task(api.http.get(f"/claims/{claim}", params={"after": seq}))
            await polls.until_parked(1)  # past the head check, polling the checkpoints
        assert not reading.done(), reading.result().text  # no projector has run: the read waits
        await guarded.project()
        response = await asyncio.wait_for(reading, WAIT)
        assert response.status_code == 200 and response.json()["claim_id"] == claim

        # Written after the API last asked the head: still in the log, so it waits rather than being refused.
        later = random_claim_id()
        seq = (await api.send("draft_claim", "ada", **draft(later))).json()["last_seq"]
        with checkpoint_polls(engine) as polls:
            reading = asyncio.create_task(api.http.get(f"/claims/{later}", headers={"Claimlog-After": str(seq)}))
            await polls.until_parked(1)
        assert not reading.done(), reading.result().text
        await guarded.project()
        assert (await asyncio.wait_for(reading, WAIT)).status_code == 200


async def test_without_the_log_the_head_is_unknown_and_a_read_waits_as_before(engine: Engine):
    async for guarded in guarded_api(None, engine):
        api_state(guarded.app).read_wait = 0.3
        response = await guarded.api.http.get("/claims", params={"after": 10**9})
        assert response.status_code == 503 and response.json()["error"] == "not_yet_visible"
