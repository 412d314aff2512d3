"""Liveness and readiness: whether the process answers, and whether its answers are current enough to serve."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from services.identity.keys import signing_report
from services.log.topology import nats_report
from services.read_api import lag
from services.read_api.api_state import api_state
from services.read_api.deps import DB
from services.read_api.partitions import partition_section
from services.registry_buckets import registry_buckets

router = APIRouter(tags=["operations"])


@router.get("/health")
async def health(request: Request, db: DB) -> JSONResponse:
    """Each projection's position and lag behind the log, and the NATS nodes that hold the log and its
    buckets (which leads each, which copies are current); on a partitioned log, each projector worker with
    the partitions it holds, their epochs and lag, and the partitions no worker holds. 503 when the read
    models cannot be read, status ``degraded`` when a copy is missing or behind."""
    try:
        found = await lag.applied(request.app, db)
    except Exception as error:  # noqa: BLE001 - health reports any failure as unavailable
        return JSONResponse({"status": "unavailable", "database": type(error).__name__}, status_code=503)
    body: dict = {"status": "ok", "database": "ok", "projections": found.positions, "head": found.head}
    if found.head is not None:
        body["lag_events"] = found.lag()
    if found.unknown is not None:
        body["unknown"] = found.unknown
    claim_log = api_state(request.app).claim_log
    if (partitions := await partition_section(claim_log, db)) is not None:
        body["partitions"] = partitions  # each worker with the partitions it holds, its epoch and lag
    if claim_log is not None:
        body["nats"] = await nats_report(claim_log.nc, claim_log.stream, registry_buckets(claim_log.stream))
        if body["nats"]["problems"]:
            body["status"] = "degraded"
        body["signing"] = await signing_report(claim_log.nc, stream=claim_log.stream)  # says when forgery is possible
        await _transparency(request, body)
    return JSONResponse(body)


async def _transparency(request: Request, body: dict) -> None:
    """The transparency log's size and its integrator's state; ``degraded`` when the integrator refused to go on."""
    published = api_state(request.app).published_log()
    if published is not None and (found := await published.health()) is not None:
        body["transparency_log"] = found
        if found["integrator"] == "refused":
            body["status"] = "degraded"


@router.get("/health/live")
async def live() -> JSONResponse:
    """The process answers. Touches neither the database nor the log: restart the process only when this fails."""
    return JSONResponse({"status": "live"})


@router.get("/health/ready")
async def ready(request: Request) -> JSONResponse:
    """200 when the read models can be read and every projection is within the configured lag of the head
    of the log (its position: every event at or below it is applied); 503 otherwise, with each
    projection's position and what is wrong. Without a connection to the log the lag is not checked."""
    app = request.app
    max_lag: int = api_state(app).guards.ready_max_lag_events
    try:
        found = await lag.applied(app)
    except Exception as error:  # noqa: BLE001 - readiness reports any failure as not ready
        problem = f"the read models cannot be read ({type(error).__name__})"
        return JSONResponse({"status": "not_ready", "database": "unavailable", "problems": [problem]}, status_code=503)
    body: dict = {"status": "ready", "database": "ok", "head": found.head, "max_lag_events": max_lag}
    problems: list[str] = []
    if found.head is None:
        body["lag_checked"] = False
        body["head_unknown"] = found.unknown
    if found.unknown is not None and api_state(app).claim_log is not None:
        problems.append(found.unknown)  # a read-only API cannot ask the log: it serves what it has
    lags = found.lag()
    body["projections"] = {name: {"last_seq": seq, "lag_events": lags[name]} for name, seq in found.positions.items()}
    for name, behind in lags.items():
        if behind is not None and behind > max_lag:
            problems.append(f"projection {name!r} is {behind} events behind the log (limit {max_lag})")
    if problems:
        return JSONResponse(body | {"status": "not_ready", "problems": problems}, status_code=503)
    return JSONResponse(body)
