"""A command API in the test's event loop: the app, a running projector, and tokens for five actors."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
from fastapi import FastAPI
from sqlalchemy import Engine

from events import Actor
from projections.registry import build_projections
from services.http.app import attach_log, create_app
from services.identity.actors import ActorStore
from services.log import ClaimLog
from services.projector import Projector


@dataclass
class Api:
    http: httpx.AsyncClient
    log: ClaimLog
    store: ActorStore
    tokens: dict[str, str]
    app: FastAPI

    async def send(self, command: str, who: str = "ada", *, headers: dict | None = None, **body) -> httpx.Response:
        auth = {"Authorization": f"Bearer {self.tokens[who]}"} if who else {}
        return await self.http.post(f"/commands/{command}", json=body, headers={**auth, **(headers or {})})

    async def page(self, claim_id: str, after: int) -> dict:
        response = await self.http.get(f"/claims/{claim_id}", params={"after": after})
        assert response.status_code == 200, response.text
        return response.json()


ACTORS = {
    "ada": Actor(id="ada", kind="person"),
    "grace": Actor(id="grace", kind="person"),
    "drafter": Actor(id="drafter", kind="model", model="drafter-2"),
    "critic": Actor(id="critic", kind="model", model="critic-1"),  # another model: it may review the drafter's claims
    "bot": Actor(id="source-bot", kind="service"),
}


async def running_api(claim_log: ClaimLog, engine: Engine, *, read_wait: float = 10.0) -> AsyncIterator[Api]:
    store = await ActorStore.open(claim_log.nc, create=True)
    tokens = {name: (await store.issue(actor))[0] for name, actor in ACTORS.items()}
    app = create_app(engine, commands=True, read_wait=read_wait)
    attach_log(app, claim_log)
    projector = Projector(claim_log, engine, build_projections(), name="projector", batch=1000)
    projector.announce = True
    stop = asyncio.Event()
    running = asyncio.create_task(projector.run(stop))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://claimlog") as http:
        yield Api(http, claim_log, store, tokens, app)
    stop.set()
    await running


def draft(claim_id: str) -> dict:
    return {
        "claim_id": claim_id,
        "slug": f"claim-{claim_id.lower()}",
        "statement": "Planning before acting helps small models.",
        "capability": "Planning",
        "observed_on": "A small benchmark.",
        "drafted_confidence": "low",
        "falsifier": "A replication that finds no effect.",
    }


