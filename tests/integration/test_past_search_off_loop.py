"""A search of a past listing builds its statement index off the event loop: plain pages answer meanwhile."""

from __future__ import annotations

import asyncio
import time

import pytest

import services.read_api.past_indexes as past_indexes
from services.read_api.search_text import statement_index
from tests.conftest import random_claim_id
from tests.integration.command_api import Api, draft


def slow_index(statements, engine):
    """An index that takes as long to build as one of tens of thousands of claims does here."""
    time.sleep(1.5)  # holds its thread; the event loop must not be that thread
    return statement_index(statements, engine)


async def test_plain_pages_answer_while_past_searches_build_their_indexes(api: Api, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(past_indexes, "statement_index", slow_index)
    claim = random_claim_id()
    sent = await api.send("draft_claim", "ada", **draft(claim))
    seq = sent.json()["last_seq"]
    await api.page(claim, seq)

    async def past_search(point: int):
        return await api.http.get("/claims", params={"as_of_seq": point, "q": "planning"})

    searches = [asyncio.create_task(past_search(point)) for point in (seq, seq - 1 if seq > 1 else seq)]
    started = time.perf_counter()
    await asyncio.sleep(0.3)  # the searches are building their indexes (a loop they block wakes this late)
    plain = await api.http.get(f"/claims/{claim}")
    waited = time.perf_counter() - started - 0.3
    assert plain.status_code == 200 and waited < 0.5, f"a plain page waited {waited:.2f}s behind past searches"
    answered = await asyncio.gather(*searches)
    assert all(response.status_code == 200 for response in answered), [r.text for r in answered]
