"""Live pages over a real socket: Server-Sent Events after each commit, resumable, filtered, and limited."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest
import uvicorn

from services.log.names import notice_subject
from services.read_api.api_state import api_state
from services.read_api.visibility import applied
from tests.conftest import random_claim_id
from tests.integration.command_api import Api, draft


@asynccontextmanager
async def served(api: Api) -> AsyncIterator[str]:
    """The test's app on a loopback port, as a browser would reach it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(api.app, host="127.0.0.1", port=port, log_level="warning"))
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


def messages(response: httpx.Response) -> AsyncIterator[dict]:
    """Each message of an event stream: its fields, data parsed as JSON."""
    return _messages(response.aiter_lines())


async def opened(response: httpx.Response) -> AsyncIterator[dict]:
    """The stream's messages, once the server has said it listens: its first comment is sent after the
    process subscribed to the projector's notices, so a write made from then on is heard."""
    lines = response.aiter_lines()
    async with asyncio.timeout(10):
        async for line in lines:
            if line.startswith(":") and "claimlog live" in line:
                return _messages(lines)
    raise AssertionError("the stream ended before it said it listens")


async def _messages(lines: AsyncIterator[str]) -> AsyncIterator[dict]:
    fields: dict = {}
    async for line in lines:
        if not line:
            if "data" in fields:
                yield fields
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            fields[name] = json.loads(value) if name == "data" else value.strip()


async def next_message(stream: AsyncIterator[dict], timeout: float = 5.0) -> dict:
    return await asyncio.wait_for(anext(stream), timeout)


async def test_a_claim_stream_says_a_change_once_it_is_committed_and_resumes_with_last_event_id(api: Api):
    claim = random_claim_id()
    first = await api.send("draft_claim", "ada", **draft(claim))
    async with served(api) as url, httpx.AsyncClient(base_url=url, timeout=10) as http:
        async with http.stream("GET", f"/claims/{claim}/live") as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            stream = await opened(response)  # the stream listens; now a write
            sent = await api.send("attach_source", "bot", claim_id=claim, source_id="s1", relation="validates",
                                  measured="Recall rises.")
            seq = sent.json()["last_seq"]
            while True:  # the draft's own notice may come first, if its commit is heard after the stream opened
                message = await next_message(stream)
                assert applied(api_state(api.app).reads.engine) >= int(message["id"])  # sent after the commit, never before
                if int(message["id"]) >= seq:
                    break
            assert (message["event"], message["id"], message["data"]) == ("changed", str(seq), {"claim_id": claim, "seq": seq})
        # A change while disconnected is told at once on reconnecting with the last id received.
        later = await api.send("file_disagreement", "grace", claim_id=claim, disagreement_id="d1", argument="Why?")
        await api.page(claim, later.json()["last_seq"])
        async with http.stream("GET", f"/claims/{claim}/live", headers={"Last-Event-ID": str(seq)}) as response:
            message = await next_message(messages(response))
            assert message["data"] == {"claim_id": claim, "seq": later.json()["last_seq"]}
    assert first.status_code == 201


async def test_a_registry_stream_filtered_by_capability_hears_only_its_claims(api: Api):
    mine, other = random_claim_id(), random_claim_id()
    capability = f"Live {mine}"
    async with (
        served(api) as url,
        httpx.AsyncClient(base_url=url, timeout=10) as http,
        http.stream("GET", "/live", params={"capability": capability}) as response,
    ):
        stream = await opened(response)
        await api.send("draft_claim", "ada", **draft(other))
        sent = await api.send("draft_claim", "ada", **{**draft(mine), "capability": capability})
        message = await next_message(stream)
        assert message["data"]["claims"] == {mine: sent.json()["last_seq"]}
        assert int(message["id"]) >= sent.json()["last_seq"]


async def test_one_client_may_keep_only_so_many_streams_open(api: Api):
    api_state(api.app).live.max_per_client = 2
    claim = random_claim_id()
    async with served(api) as url, httpx.AsyncClient(base_url=url, timeout=10) as http:
        async with http.stream("GET", f"/claims/{claim}/live"), http.stream("GET", "/live"):
            refused = await http.get(f"/claims/{claim}/live")
            assert refused.status_code == 429 and refused.json()["error"] == "too_many_streams"
        for _ in range(100):  # a closed stream frees its place once the server notices (seconds)
            async with http.stream("GET", f"/claims/{claim}/live") as again:
                if again.status_code == 200:
                    break
            await asyncio.sleep(0.1)
        assert again.status_code == 200


@pytest.mark.parametrize("path", ["/claims/CLM-12/live", "/claims/x/live"])
async def test_a_stream_for_no_claim_id_is_refused(api: Api, path: str):
    assert (await api.http.get(path)).status_code == 422


async def test_a_notice_no_projector_sends_never_reaches_a_browser(api: Api):
    claim = random_claim_id()
    await api.send("draft_claim", "ada", **draft(claim))
    claim_log = api_state(api.app).claim_log
    forged = ({"claims": {claim: 10**26}, "through": 10**26}, {"claims": {claim: True}, "through": 1},
              {"claims": {claim: 9}, "through": 8}, {"claims": {"<script>": 5}, "through": 5})
    async with (served(api) as url, httpx.AsyncClient(base_url=url, timeout=10) as http,
                http.stream("GET", f"/claims/{claim}/live") as response):
        stream = messages(response)
        await asyncio.sleep(0.2)
        for notice in forged:
            await claim_log.nc.publish(notice_subject(claim_log.stream), json.dumps(notice).encode())
        sent = await api.send("attach_source", "bot", claim_id=claim, source_id="s1", relation="validates", measured="M.")
        message = await next_message(stream)
        assert message["data"] == {"claim_id": claim, "seq": sent.json()["last_seq"]}


async def test_a_process_keeps_only_so_many_streams_open_and_says_when_to_retry(api: Api):
    api_state(api.app).live.max_streams = 2
    claim = random_claim_id()
    async with (
        served(api) as url,
        httpx.AsyncClient(base_url=url, timeout=10) as http,
        http.stream("GET", f"/claims/{claim}/live"),
        http.stream("GET", "/live"),
    ):
        refused = await http.get("/live")
        assert refused.status_code == 503 and refused.json()["error"] == "too_many_streams"
        assert refused.headers["retry-after"] == "5"


async def test_every_registry_stream_gets_the_one_message_the_feed_makes_of_a_burst(api: Api):
    claims = [random_claim_id() for _ in range(3)]
    feed = api_state(api.app).live.registry
    async with (
        served(api) as url,
        httpx.AsyncClient(base_url=url, timeout=10) as http,
        http.stream("GET", "/live") as first,
        http.stream("GET", "/live") as second,
    ):
        streams = [messages(first), messages(second)]
        await asyncio.sleep(0.2)
        before = feed.version
        sent = [await api.send("draft_claim", "ada", **draft(claim)) for claim in claims]
        got = [await next_message(stream) for stream in streams]
    assert got[0] == got[1] and feed.version - before <= 2  # one message a second, whatever the streams
    seen = {claim: seq for message in got[:1] for claim, seq in message["data"]["claims"].items()}
    assert set(seen) <= set(claims) and seen
    assert max(r.json()["last_seq"] for r in sent) >= int(got[0]["id"])
