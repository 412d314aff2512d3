"""The HTTP API's application factory: reads always, commands when the process can write to the log."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from nats.errors import Error as NatsError
from sqlalchemy import Engine
from sqlalchemy.exc import OperationalError
from starlette.exceptions import HTTPException as StarletteHTTPException

from projections.registry import build_projections
from services.commands.models import COMMAND_TYPES
from services.commands.problems import problem_text, unknown_command, where
from services.commands.service import CommandService
from services.http.commands import router as command_router
from services.http.openapi import LICENSE, install_openapi
from services.identity.actors import ActorStore
from services.identity.rate_limit import RateLimiter, SharedBuckets
from services.log import ClaimLog
from services.log.names import RATES
from services.log.shared_state import LazyBucket
from services.read_api.aggregates import counts_methods
from services.read_api.aggregates import router as aggregates_router
from services.read_api.api_state import ApiState, ReadPosition, WriteSide, api_state, install_state
from services.read_api.browser import Cors, install_browser_policy
from services.read_api.command_metrics import CommandMetrics, CommandTimer
from services.read_api.contract import router as contract_router
from services.read_api.contributors import router as contributors_router
from services.read_api.disagreements import router as disagreements_router
from services.read_api.docs import install_docs
from services.read_api.errors import ANY_REFUSAL, READ_ERRORS
from services.read_api.feed import router as feed_router
from services.read_api.guards import BodyLimits, Guards
from services.read_api.health import router as health_router
from services.read_api.history import router as history_router
from services.read_api.history_page import router as history_page_router
from services.read_api.live_hub import LiveHub
from services.read_api.live_streams import router as live_router
from services.read_api.metrics import router as metrics_router
from services.read_api.pages import router as pages_router
from services.read_api.registry_text import router as text_router
from services.read_api.routes import router
from services.read_api.transparency import router as transparency_router

Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]


def create_app(
    engine: Engine,
    *,
    commands: bool = False,
    lifespan: Lifespan | None = None,
    read_wait: float = 5.0,
    guards: Guards | None = None,
    cors: Cors | None = None,
) -> FastAPI:
    """The API over the read models behind ``engine``; with ``commands``, also the command routes.

    The command routes need a writer on the log: ``attach_log`` gives them one, typically from
    ``lifespan`` once the process has connected to NATS. ``guards`` are its limits (body size, JSON depth,
    writes per actor, readiness lag), the settings' defaults when not given; ``cors`` the browser frontends
    on other origins that may call it (none when not given).
    """
    app = FastAPI(
        title="claimlog API",
        version="0.1.0",
        description="Claim pages and listings folded from the claim log; commands that append to it.",
        license_info=LICENSE,
        servers=[{"url": "/", "description": "The API serving this document."}],
        lifespan=lifespan,
        docs_url=None,  # install_docs serves them, without a CDN
        redoc_url=None,
    )
    limits = guards or Guards()
    state = ApiState(
        reads=ReadPosition(engine, [projection.name for projection in build_projections()]),
        guards=limits,
        live=LiveHub(max_streams=limits.live_streams, max_per_client=limits.live_streams_per_client),
        read_wait=read_wait,
        write_side=WriteSide(enabled=commands),
    )
    install_state(app, state)
    app.include_router(counts_methods)  # before the claim page, whose path would take /claims/counts
    for reads in (
        router, aggregates_router, feed_router, history_router, disagreements_router, contributors_router, text_router
    ):
        app.include_router(reads, responses=READ_ERRORS)
    app.include_router(contract_router, responses=ANY_REFUSAL)
    app.include_router(history_page_router)
    app.include_router(pages_router)
    install_docs(app)
    if commands:
        app.include_router(command_router)
    app.include_router(live_router)
    app.include_router(health_router, responses=ANY_REFUSAL)
    app.include_router(transparency_router, responses=READ_ERRORS)
    app.include_router(metrics_router, responses=ANY_REFUSAL)
    install_openapi(app)
    _install_limits(app, state)
    install_browser_policy(app, cors or Cors())
    # Starlette's, not FastAPI's subclass: what FastAPI raises itself (a body it cannot parse, an unknown route) too.
    app.add_exception_handler(StarletteHTTPException, _error_body)
    app.add_exception_handler(RequestValidationError, _invalid_request)
    app.add_exception_handler(OperationalError, _database_unavailable)
    app.add_exception_handler(NatsError, _log_unavailable)
    return app


def _install_limits(app: FastAPI, state: ApiState) -> None:
    """Give ``app`` its limits and, with commands, the per-actor rate limit and the request metrics
    (outermost, so refused requests are counted too)."""
    guards = state.guards
    app.add_middleware(BodyLimits, max_bytes=guards.max_body_bytes, max_depth=guards.max_json_depth)
    if state.write_side.enabled:
        if guards.rate_limit_per_minute > 0:
            state.write_side.rate_limiter = RateLimiter(per_minute=guards.rate_limit_per_minute, burst=guards.rate_limit_burst)
        state.write_side.metrics = CommandMetrics(COMMAND_TYPES)
        app.add_middleware(CommandTimer, metrics=state.write_side.metrics)


def attach_log(app: FastAPI, claim_log: ClaimLog) -> None:
    """Give the app its connection to the log: the change feed reads it, and the command routes (when
    the app has them) write through it, with the actors store on the same connection."""
    state = api_state(app)
    state.claim_log = claim_log
    if state.write_side.enabled:
        state.write_side.commands = CommandService(claim_log)
        limiter = state.write_side.rate_limiter
        if limiter is not None:  # every API process on this log draws on the same allowances
            bucket = LazyBucket(claim_log.nc, RATES, stream=claim_log.stream, replicas=claim_log.spec.replicas)
            state.write_side.rate_limiter = RateLimiter(per_minute=limiter.per_minute, burst=limiter.burst, buckets=SharedBuckets(bucket))
        state.write_side.actor_store = _store_opener(claim_log)


def _store_opener(claim_log: ClaimLog) -> Callable[[], Awaitable[ActorStore]]:
    opened: list[ActorStore] = []
    lock = asyncio.Lock()

    async def actor_store() -> ActorStore:
        if not opened:
            async with lock:
                if not opened:
                    opened.append(await ActorStore.open(claim_log.nc, stream=claim_log.stream))
        return opened[0]

    return actor_store


async def _error_body(request: Request, error: StarletteHTTPException) -> JSONResponse:
    """Answer errors with {error, message} rather than FastAPI's {detail}."""
    path = request.url.path
    if error.status_code == 404 and error.detail == "Not Found" and path.startswith("/commands/") and api_state(request.app).write_side.enabled:
        message = f"{unknown_command(path.removeprefix('/commands/'))}; POST /commands/NAME, or POST /commands with the name in 'command'"
        return JSONResponse({"error": "unknown_command", "message": message}, status_code=404)
    body = error.detail if isinstance(error.detail, dict) else {"error": "http_error", "message": str(error.detail)}
    return JSONResponse(body, status_code=error.status_code, headers=getattr(error, "headers", None))


async def _database_unavailable(request: Request, error: OperationalError) -> JSONResponse:
    """The read models cannot be reached: a 503 to retry, without the driver's text (it can hold the URL)."""
    body = {"error": "database_unavailable", "message": "the read models cannot be read right now; retry"}
    return JSONResponse(body, status_code=503, headers={"Retry-After": "1"})


async def _log_unavailable(request: Request, error: NatsError) -> JSONResponse:
    """The connection to the log is gone (closed, or no answer): a 503 to retry."""
    body = {"error": "log_unavailable", "message": f"the log cannot be reached right now ({type(error).__name__}); retry"}
    return JSONResponse(body, status_code=503, headers={"Retry-After": "1"})


async def _invalid_request(request: Request, error: RequestValidationError) -> JSONResponse:
    """A request that does not validate: every problem, each with where it is."""
    problems = [{"where": where(e, "body"), "problem": problem_text(e)} for e in error.errors()[:20]]
    summary = "; ".join(f"{p['where']}: {p['problem']}" for p in problems[:5])
    return JSONResponse({"error": "invalid_request", "message": summary, "problems": problems}, status_code=422)
