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

from services.read_api.consistency import applied
from services.read_api.state import api_state
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


async def messages(response: httpx.Response) -> AsyncIterator[dict]:
    """Each message of an event stream: its fields, data parsed as JSON."""
    fields: dict = {}
    async for line in response.aiter_lines():
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
            stream = messages(response)
            await asyncio.sleep(0.2)  # the stream is open; now a write
            sent = await api.send("attach_source", "bot", claim_id=claim, source_id="s1", relation="validates",
                                  measured="Recall rises.")
            seq = sent.json()["last_seq"]
            message = await next_message(stream)
            assert applied(api_state(api.app).engine) >= seq  # sent after the commit, never before
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
        stream = messages(response)
        await asyncio.sleep(0.2)
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
