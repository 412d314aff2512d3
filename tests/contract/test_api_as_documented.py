"""The API does what its OpenAPI document says, where the two used to differ, on a real nats-server."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from services.commands.models import parse_command
from tests.integration.command_api import Api, draft, running_api

# What is checked here is HTTP, the same on either database.
SQLITE = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


@pytest.fixture
async def api(claim_log, engine) -> AsyncIterator[Api]:
    async for running in running_api(claim_log, engine, read_wait=0.5):
        yield running


@SQLITE
@pytest.mark.parametrize("method", ["GET", "HEAD", "OPTIONS", "PUT", "DELETE"])
async def test_claims_counts_serves_post_only_and_says_so(api: Api, method: str):
    """GET /claims/counts reached the claim page (404 for a claim 'counts'), and OPTIONS said Allow: GET."""
    response = await api.http.request(method, "/claims/counts")
    assert response.status_code == 405 and response.headers["allow"] == "POST", (response.status_code, response.headers)
    if method != "HEAD":
        assert response.json()["error"] == "method_not_allowed"
    assert (await api.http.post("/claims/counts", json={"claim_ids": ["CLM-0001"]})).json()["missing"] == ["CLM-0001"]


@SQLITE
async def test_a_missing_claims_text_page_is_a_json_404(api: Api):
    response = await api.http.get("/claims/CLM-9999/text")
    assert response.status_code == 404 and response.headers["content-type"] == "application/json"
    assert response.json()["error"] == "claim_not_found"


@SQLITE
async def test_an_integer_written_with_a_zero_fraction_is_that_integer(api: Api, claim_id: str):
    """JSON Schema's ``integer`` holds ``1.0``: a body the document allows is decided, not refused as malformed."""
    assert (await api.send("draft_claim", "drafter", **draft(claim_id))).status_code == 201
    review = {"claim_id": claim_id, "review_id": "r1", "verdict": "sound", "confidence": "low", "revision": 1.0}
    response = await api.send("record_review", "ada", **review)
    assert response.status_code == 201, response.text
    page = await api.page(claim_id, after=response.json()["last_seq"])
    assert [r["revision"] for r in page["reviews"]] == [1]


@pytest.mark.parametrize("value", ["1", True, 1.5])
def test_an_integer_field_still_refuses_text_booleans_and_fractions(value):
    line = {"command": "record_review", "claim_id": "CLM-0001", "review_id": "r1", "verdict": "sound", "confidence": "low"}
    with pytest.raises(ValueError, match="revision"):
        parse_command({**line, "revision": value})


@SQLITE
async def test_a_write_without_a_bearer_token_gets_the_apis_own_401(api: Api, claim_id: str):
    for headers in ({}, {"Authorization": "Basic abc"}, {"Authorization": "Bearer"}, {"Authorization": "Bearer nope"}):
        response = await api.http.post("/commands/draft_claim", json=draft(claim_id), headers=headers)
        assert response.status_code == 401 and response.json()["error"] == "unauthorized", (headers, response.text)
        assert response.headers["www-authenticate"] == 'Bearer realm="claimlog"'
