"""What an API process serves with, built once by the app factory (``services/http/app.py``) and handed
to routes as a typed dependency.

``ApiState`` holds every service a route may use: the engine of the active read-model generation, the
connection to the log once the process has one, the command service, the limits, the live hub, the
metrics and the as-of caches (folded summaries, their statement indexes). The app keeps it as its one
attribute, and this module is the only one that touches ``app.state`` (``tests/unit/test_composition.py``
checks it): a route takes ``Api`` (or a narrower alias of ``deps.py``), code holding the app calls
``api_state(app)``. It may import the read API's own services and ``services.commands``,
``services.log``, ``services.timeline``; never a module of routes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, FastAPI, HTTPException, Request
from sqlalchemy import Engine

from services.actors import ActorStore
from services.commands.rate_limit import RateLimiter
from services.commands.service import CommandService
from services.log import ClaimLog
from services.read_api.command_metrics import CommandMetrics
from services.read_api.guards import Guards
from services.read_api.live_hub import LiveHub
from services.read_api.search_text import StatementIndexes
from services.timeline.cache import ClaimEvents
from services.timeline.scorecard import RegistryHistory


async def _not_ready() -> ActorStore:
    raise HTTPException(503, detail={"error": "not_ready", "message": "the API is not connected to the log yet"})


@dataclass(eq=False)
class ApiState:
    """The services of one API process. ``engine`` and ``generation`` change when a rebuilt generation is
    switched to; ``claim_log``, ``commands`` and ``actor_store`` are set once the process is connected."""

    engine: Engine
    guards: Guards
    live: LiveHub
    projection_names: list[str]
    read_wait: float = 5.0
    writes: bool = False  # whether the app has the command routes
    generation: int | None = None
    applied: int = 0  # the highest checkpoint this process has seen (for read-your-writes)
    log_head: int = 0  # the highest head of the log it has seen (a sequence past it is refused, not awaited)
    # What it knows of each partition's progress: a consistency.Visibility (typed there, since that module
    # imports this one), made anew for each generation's engine.
    visibility: object | None = None
    checkpoint_samples: dict[str, tuple[float, int]] = field(default_factory=dict)  # for the metrics' rates
    claim_log: ClaimLog | None = None
    commands: CommandService | None = None
    actor_store: Callable[[], Awaitable[ActorStore]] = _not_ready
    rate_limiter: RateLimiter | None = None
    command_metrics: CommandMetrics | None = None
    claim_events: ClaimEvents = field(default_factory=ClaimEvents)
    registry_history: RegistryHistory = field(default_factory=RegistryHistory)
    statement_indexes: StatementIndexes = field(default_factory=StatementIndexes)


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
