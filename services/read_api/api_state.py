"""What an API process serves with, built once by the app factory (``services/http/app.py``) and handed
to routes as a typed dependency.

``ApiState`` holds every service a route may use, in three parts beside the limits, the live hub and the
connection to the log: ``ReadPosition`` (the active read-model generation's engine and what the process
knows of how far it and the log have got), ``WriteSide`` (the command service, the actors store, the rate
limit and the command metrics) and ``PastCaches`` (what as-of reads keep). The app keeps it as its one
attribute, and this module is the only one that touches ``app.state`` (``tests/unit/test_composition.py``
checks it): a route takes ``Api`` (or a narrower alias of ``deps.py``), code holding the app calls
``api_state(app)``. It may import the read API's own services and ``services.commands``,
``services.log``, ``services.timeline``, ``services.tlog``; never a module of routes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, FastAPI, HTTPException, Request
from sqlalchemy import Engine

from services.commands.service import CommandService
from services.identity.actors import ActorStore
from services.identity.rate_limit import RateLimiter
from services.log import ClaimLog
from services.read_api.command_metrics import CommandMetrics
from services.read_api.guards import Guards
from services.read_api.live_hub import LiveHub
from services.read_api.past_indexes import PastIndexes
from services.read_api.visibility import Visibility
from services.timeline.cache import ClaimEvents
from services.timeline.scorecard import RegistryHistory
from services.tlog.published import PublishedLog


async def _not_ready() -> ActorStore:
    raise HTTPException(503, detail={"error": "not_ready", "message": "the API is not connected to the log yet"})


@dataclass(eq=False)
class ReadPosition:
    """Where this process reads, and how far it knows the read models and the log have got. ``engine`` and
    ``generation`` change when a rebuilt generation is switched to (``services/http/server.py``), and the
    positions start again with them."""

    engine: Engine
    projection_names: list[str]
    generation: int | None = None
    applied: int = 0  # the highest checkpoint this process has seen (for read-your-writes)
    log_head: int = 0  # the highest head of the log it has seen (a sequence past it is refused, not awaited)
    visibility: Visibility | None = None  # what it knows of each partition's progress, made anew for each generation's engine
    checkpoint_samples: dict[str, tuple[float, int]] = field(default_factory=dict)  # for the metrics' rates


@dataclass(eq=False)
class WriteSide:
    """The command routes' services: ``enabled`` when the app has them; the service and the actors store are
    set once the process is connected to the log, the limiter made shared then."""

    enabled: bool = False
    commands: CommandService | None = None
    actor_store: Callable[[], Awaitable[ActorStore]] = _not_ready
    rate_limiter: RateLimiter | None = None
    metrics: CommandMetrics | None = None


@dataclass(eq=False)
class PastCaches:
    """What as-of reads keep between requests: claims' events, the registry's folded history, and the past
    search's statement indexes (each bounded: services/timeline/, past_indexes.py)."""

    claim_events: ClaimEvents = field(default_factory=ClaimEvents)
    registry_history: RegistryHistory = field(default_factory=RegistryHistory)
    statement_indexes: PastIndexes = field(default_factory=PastIndexes)


@dataclass(eq=False)
class ApiState:
    """The services of one API process: where it reads (``reads``), its limits and live hub, its connection to
    the log once it has one, the command side (``write_side``), the as-of caches (``pasts``) and the
    transparency log it serves."""

    reads: ReadPosition
    guards: Guards
    live: LiveHub
    read_wait: float = 5.0
    claim_log: ClaimLog | None = None  # set once the process is connected (never by ``--read-only``)
    write_side: WriteSide = field(default_factory=WriteSide)
    pasts: PastCaches = field(default_factory=PastCaches)
    transparency: PublishedLog | None = None  # the transparency log /log/ serves, opened on first use

    def published_log(self) -> PublishedLog | None:
        """The transparency log this process serves, opened on first use; None before it is connected to the log."""
        if self.claim_log is None:
            return None
        if self.transparency is None:
            self.transparency = PublishedLog(self.claim_log.nc, self.claim_log.stream)
        return self.transparency


def install_state(app: FastAPI, state: ApiState) -> None:
    """Make ``state`` the services ``app`` serves with."""
    app.state.api = state


def api_state(app: FastAPI) -> ApiState:
    """The services ``app`` serves with."""
    return app.state.api


async def request_state(request: Request) -> ApiState:
    """The services of the app serving the request. A coroutine, though it never waits: FastAPI runs a
    plain function dependency in its thread pool, a hop that costs more than the claim page's query."""
    return request.app.state.api


Api = Annotated[ApiState, Depends(request_state)]
