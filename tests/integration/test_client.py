"""The Python client against the real command API: retries that never publish twice, clear refusals."""

from __future__ import annotations

import httpx
import pytest
from pydantic import ValidationError

from services.client import AsyncClaimlogClient, CommandRejected, RetryPolicy
from tests.conftest import random_claim_id
from tests.integration.command_api import Api, draft

FAST = RetryPolicy(attempts=4, base_delay=0.01)


class Flaky(httpx.AsyncBaseTransport):
    """Forwards to the app, but loses the first answers after the write happened, or answers 503 before it."""

    def __init__(self, inner: httpx.AsyncBaseTransport, *, lose: int = 0, unavailable: int = 0) -> None:
        self.inner, self.lose, self.unavailable, self.sent = inner, lose, unavailable, 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sent += 1
        if self.unavailable:
            self.unavailable -= 1
            return httpx.Response(503, json={"error": "log_unavailable", "message": "restarting"}, headers={"Retry-After": "0"})
        response = await self.inner.handle_async_request(request)
        if self.lose:
            self.lose -= 1
            await response.aread()
            raise httpx.ReadTimeout("the answer was lost", request=request)
        return response


def client(api: Api, who: str, transport: httpx.AsyncBaseTransport) -> AsyncClaimlogClient:
    return AsyncClaimlogClient("http://claimlog", api.tokens[who], retry=FAST, transport=transport)


async def test_a_retry_after_a_lost_answer_publishes_once_and_returns_the_first_sequence(api: Api):
    claim = random_claim_id()
    transport = Flaky(api.http._transport)
    async with client(api, "ada", transport) as ada:
        first = await ada.draft_claim(**draft(claim))
        head = await api.log.head()
        transport.lose = 1
        written = await ada.attach_source(claim_id=claim, source_id="s1", relation="supports", measured="+4.")
    assert transport.sent == 3  # the lost answer, its retry, and the draft
    assert written.duplicate is True and written.last_seq == head + 1 > first.last_seq
    assert [s.event.type for s in await api.log.read_claim(claim)] == ["ClaimDrafted", "SourceAttached"]


async def test_an_unavailable_api_is_retried_until_it_answers(api: Api):
    claim = random_claim_id()
    transport = Flaky(api.http._transport, unavailable=2)
    async with client(api, "ada", transport) as ada:
        written = await ada.draft_claim(**draft(claim))
        page = await ada.page(claim, after=written.last_seq)
    assert transport.sent == 4 and written.duplicate is False
    assert page["claim_id"] == claim


async def test_a_refusal_raises_with_its_reason_and_bad_input_never_leaves(api: Api):
    transport = Flaky(api.http._transport)
    async with client(api, "bot", transport) as bot:
        with pytest.raises(CommandRejected) as refused:
            await bot.attach_source(claim_id=random_claim_id(), source_id="s1", relation="supports", measured="x")
        assert (refused.value.status, refused.value.reason) == (404, "claim_not_found")
        sent = transport.sent
        with pytest.raises(ValidationError, match="relation"):
            await bot.attach_source(claim_id=random_claim_id(), source_id="s1", relation="proves", measured="x")
        with pytest.raises(ValueError, match="unknown command 'teleport_claim'"):
            await bot.send("teleport_claim", claim_id=random_claim_id())
    assert transport.sent == sent
