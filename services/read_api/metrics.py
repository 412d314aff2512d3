"""``GET /metrics``: the projections' progress and lag, read at scrape time, and the command API's requests.

Projection figures come from the active read-model generation and the log when Prometheus scrapes,
never on a request's path. Command requests are counted by ASGI middleware, labelled by the route
(one of the command names, ``any`` for ``POST /commands``, ``unknown`` for any other path), so a
caller cannot make new label values up.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric

from services.read_api import lag
from services.read_api.api_state import Api, api_state

router = APIRouter(tags=["operations"])


@dataclass
class Scrape:
    """What one scrape found: read-model figures, the head of the log, and the projections' rates."""

    up: bool
    positions: dict[str, int] = field(default_factory=dict)
    unreadable: int = 0
    parked: int = 0
    head: lag.Head = field(default_factory=lambda: lag.Head(None, "not read"))
    lag_seconds: dict[str, float] = field(default_factory=dict)
    rates: dict[str, float] = field(default_factory=dict)

    def collect(self) -> Iterable[Metric]:
        """The scrape as Prometheus metric families (a custom collector)."""
        yield _gauge("claimlog_read_models_up", "1 when the active read-model generation could be read, else 0.", self.up)
        known = self.head.seq is not None
        yield _gauge(
            "claimlog_log_head_known",
            "1 when the API read the head of the log; 0 when it could not, and the lag metrics are then absent."
            + (f" Now 0: {self.head.unknown}." if not known else ""),
            known,
        )
        if known:
            yield _gauge("claimlog_log_head_seq", "The sequence of the last event in the log.", self.head.seq)
        if not self.up:
            return
        yield _gauge("claimlog_unreadable_events", "Events in the log no projection could read (table unreadable_events).", self.unreadable)
        yield _gauge("claimlog_parked_events", "Events parked after a projection failed on them (0 without a parked_events table).", self.parked)
        yield _per_projection(
            "claimlog_projection_last_applied_seq",
            "The projection's position: every event of the log at or below it is applied (absent when unknown).",
            self.positions,
        )
        yield _per_projection(
            "claimlog_projection_events_applied_per_second",
            "Log sequences the projection went through per second between the two last scrapes "
            "of this API process (NaN on its first scrape or after a generation switch).",
            self.rates,
        )
        if known:
            behind = {name: max(0, self.head.seq - seq) for name, seq in self.positions.items()}
            yield _per_projection(
                "claimlog_projection_lag_events", "Sequences of the log between the projection's position and the head.", behind
            )
            yield _per_projection(
                "claimlog_projection_lag_seconds",
                "How long the oldest event the projection has not applied has been in the log (its store "
                "time, which for an imported event is its original one); 0 when it is caught up.",
                self.lag_seconds,
            )


def _gauge(name: str, documentation: str, value: float | bool | None) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=float(value or 0))


def _per_projection(name: str, documentation: str, values: dict[str, float]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, documentation, labels=["projection"])
    for projection, value in sorted(values.items()):
        family.add_metric([projection], float(value))
    return family


async def scrape(app: FastAPI) -> Scrape:
    """Read the active generation's positions and counts, and the log's head, now."""
    try:
        state = api_state(app)
        with state.reads.engine.connect() as conn:
            unreadable, parked = lag.unreadable_count(conn), lag.parked_count(conn)
        found = await lag.applied(app)
    except Exception:  # noqa: BLE001 - a scrape reports the read models down rather than failing
        return Scrape(up=False, head=await lag.log_head(app))
    positions = {name: seq for name, seq in found.positions.items() if seq is not None}
    head = lag.Head(found.head, found.unknown)
    scraped = Scrape(up=True, positions=positions, unreadable=unreadable, parked=parked, head=head)
    scraped.rates = _rates(app, positions)
    if found.head is not None:
        for name, seq in positions.items():
            since = await lag.waiting_since(app, seq) if seq < found.head else None
            if seq >= found.head or since is not None:
                scraped.lag_seconds[name] = lag.seconds_since(since) if since else 0.0
    return scraped


def _rates(app: FastAPI, positions: dict[str, int]) -> dict[str, float]:
    """Sequences per second since this process's previous scrape, from the checkpoints then and now."""
    now = time.monotonic()
    previous = api_state(app).reads.checkpoint_samples
    rates = {}
    for name, seq in positions.items():
        then, old = previous.get(name, (now, seq + 1))
        rates[name] = (seq - old) / (now - then) if seq >= old and now > then else float("nan")
        previous[name] = (now, seq)
    return rates


@router.get("/metrics", response_class=Response)
async def metrics(request: Request, api: Api) -> Response:
    """Prometheus metrics: per projection, its checkpoint, lag (events, seconds) and rate; unreadable
    and parked events; the command API's requests by command and status, and their latencies."""
    found = await scrape(request.app)
    text = generate_latest(found)  # type: ignore[arg-type] - any object with collect() is a registry here
    if api.write_side.metrics is not None:
        text += generate_latest(api.write_side.metrics.registry)
    return Response(text, media_type=CONTENT_TYPE_LATEST)
