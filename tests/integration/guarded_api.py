"""A command API with chosen limits, on the test's log and database, and a projector run on demand."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
from fastapi import FastAPI
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import Engine

from projections.registry import build_projections
from services.http.app import attach_log, create_app
from services.identity.actors import ActorStore
from services.log import ClaimLog
from services.projector import Projector
from services.read_api.guards import Guards
from tests.integration.command_api import ACTORS, Api


@dataclass
class Guarded:
    app: FastAPI
    api: Api
    engine: Engine

    async def project(self) -> int:
        """Run the projector until it has applied the head of the log; returns that head."""
        head = await self.api.log.head()
        await Projector(self.api.log, self.engine, build_projections(), name="projector", batch=1000).run_until(head)
        return head

    async def metrics(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        """``GET /metrics`` parsed: (sample name, sorted labels) -> value."""
        response = await self.api.http.get("/metrics")
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
        return {
            (sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(response.text)
            for sample in family.samples
        }


async def guarded_api(
    claim_log: ClaimLog | None, engine: Engine, guards: Guards | None = None
) -> AsyncIterator[Guarded]:
    """The app with commands and ``guards``, attached to ``claim_log`` (unless None); no projector running."""
    app = create_app(engine, commands=True, read_wait=10.0, guards=guards)
    tokens: dict[str, str] = {}
    store = None
    if claim_log is not None:
        store = await ActorStore.open(claim_log.nc, create=True)
        tokens = {name: (await store.issue(actor))[0] for name, actor in ACTORS.items()}
        attach_log(app, claim_log)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://claimlog") as http:
        yield Guarded(app, Api(http, claim_log, store, tokens, app), engine)


def projection(name: str) -> tuple[tuple[str, str], ...]:
    """The label set of one projection's samples."""
    return (("projection", name),)
