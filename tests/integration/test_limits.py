"""Writes per actor are rate-limited, and oversized or over-deep bodies are refused before any work:
against a real nats-server, on SQLite and PostgreSQL, and nothing refused reaches the log."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import pytest
from sqlalchemy import Engine

from services.http.app import attach_log, create_app
from services.log import ClaimLog, StreamSpec, connect
from services.read_api.guards import Guards
from tests.conftest import random_claim_id
from tests.integration.command_api import draft
from tests.integration.guarded_api import Guarded, guarded_api

# One write a minute after a burst of three: no test runs long enough to earn a fourth.
LIMITS = Guards(rate_limit_per_minute=1, rate_limit_burst=3, max_body_bytes=4096, max_json_depth=8)


@pytest.fixture
async def guarded(claim_log: ClaimLog, engine: Engine) -> AsyncIterator[Guarded]:
    async for running in guarded_api(claim_log, engine, LIMITS):
        yield running


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


async def test_an_actor_over_its_rate_gets_429_with_retry_after_and_publishes_nothing(guarded: Guarded):
    api = guarded.api
    claims = [random_claim_id() for _ in range(4)]
    for claim in claims[:3]:
        assert (await api.send("draft_claim", "ada", **draft(claim))).status_code == 201
    head = await api.log.head()
    refused = await api.send("draft_claim", "ada", **draft(claims[3]))
    assert refused.status_code == 429
    assert refused.json()["error"] == "rate_limited"
    assert "'ada' sent more than 1 writes a minute (burst 3)" in refused.json()["message"]
    assert 1 <= int(refused.headers["retry-after"]) <= 60
    generic = await api.http.post(
        "/commands", json={"command": "draft_claim", **draft(claims[3])}, headers={"Authorization": f"Bearer {api.tokens['ada']}"}
    )
    assert generic.status_code == 429  # every command route draws on the same allowance
    assert await api.log.head() == head
    # The limit is per actor: another actor still writes.
    assert (await api.send("draft_claim", "grace", **draft(claims[3]))).status_code == 201
    counted = await guarded.metrics()
    assert counted[("claimlog_command_requests_total", (("command", "draft_claim"), ("status", "429")))] == 1


async def test_the_rate_limit_holds_across_api_processes(guarded: Guarded, nats_url: str, engine: Engine):
    # A second API process: its own app and its own connection to the same log.
    other_nc = await connect(nats_url)
    try:
        other_log = ClaimLog(other_nc, StreamSpec("CLAIMS"))
        other = create_app(engine, commands=True, read_wait=10.0, guards=LIMITS)
        attach_log(other, other_log)
        auth = {"Authorization": f"Bearer {guarded.api.tokens['ada']}"}
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=other), base_url="http://claimlog") as second:
            statuses = []
            for index in range(6):  # alternating between the two processes: the burst of three is shared
                claim = random_claim_id()
                if index % 2:
                    response = await second.post("/commands/draft_claim", json=draft(claim), headers=auth)
                else:
                    response = await guarded.api.send("draft_claim", "ada", **draft(claim))
                statuses.append(response.status_code)
    finally:
        await other_nc.close()
    assert statuses == [201, 201, 201, 429, 429, 429]


async def test_a_body_over_the_size_limit_is_refused_with_413_read_or_streamed(guarded: Guarded):
    api = guarded.api
    claim = random_claim_id()
    head = await api.log.head()
    big = draft(claim) | {"statement": "x" * 5000}
    auth = {"Authorization": f"Bearer {api.tokens['ada']}", "Content-Type": "application/json"}
    declared = await api.http.post("/commands/draft_claim", content=json.dumps(big), headers=auth)
    assert declared.status_code == 413
    assert declared.json()["error"] == "payload_too_large"
    assert "the limit is 4096 bytes (CLAIMLOG_MAX_BODY_BYTES)" in declared.json()["message"]

    async def chunks():  # no Content-Length: the size shows only while reading
        for _ in range(10):
            yield b" " * 1000

    streamed = await api.http.post("/commands", content=chunks(), headers=auth)
    assert "content-length" not in streamed.request.headers
    assert streamed.status_code == 413 and "passed 4096 bytes while being read" in streamed.json()["message"]
    unauthenticated = await api.http.post("/commands/draft_claim", content=json.dumps(big))
    assert unauthenticated.status_code == 413  # refused before anything, the token included, is looked at
    assert await api.log.head() == head
    assert (await api.send("draft_claim", "ada", **draft(claim))).status_code == 201  # under the limit


async def test_json_nested_too_deep_is_refused_with_422_saying_where(guarded: Guarded):
    api = guarded.api
    claim = random_claim_id()
    head = await api.log.head()
    auth = {"Authorization": f"Bearer {api.tokens['ada']}", "Content-Type": "application/json"}
    deep = json.dumps(draft(claim))[:-1] + f', "extra": {nested(8)}}}'  # the body's object is one level more
    refused = await api.http.post("/commands/draft_claim", content=deep, headers=auth)
    assert refused.status_code == 422
    body = refused.json()
    assert body["error"] == "invalid_request"
    assert body["problems"] == [
        {"where": "body", "problem": f"JSON nested deeper than 8 levels (the bracket at byte {deep.index('[' * 8) + 7})"}
    ]
    very_deep = await api.http.post("/commands", content=nested(2000), headers=auth)
    assert very_deep.status_code == 422 and "nested deeper than 8 levels" in very_deep.json()["message"]
    assert await api.log.head() == head
    # Brackets inside a string nest nothing.
    bracketed = draft(claim) | {"statement": "Planning [[[[[[[[[[[[ helps ]]]]]]]]]]]] \"small\" {{{{{{{{{{ models."}
    accepted = await api.send("draft_claim", "ada", **bracketed)
    assert accepted.status_code == 201, accepted.text


async def test_a_huge_string_under_the_body_limit_is_refused_with_422_naming_the_field(claim_log: ClaimLog, engine: Engine):
    async for guarded in guarded_api(claim_log, engine):  # the default limits: a 1 MiB body
        api = guarded.api
        head = await api.log.head()
        claim = random_claim_id()
        huge = await api.send("draft_claim", "ada", **(draft(claim) | {"statement": "x" * 500_000}))
        assert huge.status_code == 422
        assert {"where": "body.statement", "problem": "String should have at most 20000 characters"} in huge.json()["problems"]
        long_id = await api.send("attach_source", "ada", claim_id=claim, source_id="s" * 100_000, relation="supports", measured="+1.")
        assert long_id.status_code == 422 and long_id.json()["problems"][0]["where"] == "body.source_id"
        auth = {"Authorization": f"Bearer {api.tokens['ada']}", "Content-Type": "application/json"}
        bomb = await api.http.post("/commands", content=nested(200_000), headers=auth)  # deeper than any parser recurses
        assert bomb.status_code == 422 and "JSON nested deeper than 32 levels" in bomb.json()["message"]
        assert await api.log.head() == head
