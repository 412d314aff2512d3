"""How far each projection is behind the head of the log: what readiness and the metrics look at."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime

from fastapi import FastAPI
from sqlalchemy import Connection, Engine, func, inspect, select, table

from projections.tables import unreadable_events
from services.log import ClaimLog
from services.projector.applied import Applied
from services.projector.applied import applied as applied_positions
from services.read_api.api_state import api_state

HEAD_TIMEOUT = 2.0  # seconds a health check or a scrape waits for the log


@dataclass(frozen=True)
class Head:
    """The last sequence in the log, or None with the reason it is not known."""

    seq: int | None
    unknown: str | None = None


async def applied(app: FastAPI, engine: Engine | None = None) -> Applied:
    """Each projection's position (every event at or below it applied) in ``engine`` (default: the active
    generation's) and the head of the log, through the app's connection if it has one; raises when the
    read models cannot be read."""
    state = api_state(app)
    return await applied_positions(state.claim_log, engine or state.reads.engine, state.reads.projection_names, timeout=HEAD_TIMEOUT)


def unreadable_count(conn: Connection) -> int:
    """How many events in the log the projections could not read."""
    return conn.execute(select(func.count()).select_from(unreadable_events)).scalar_one()


def parked_count(conn: Connection) -> int:
    """How many events wait in ``parked_events`` (0 where the read models have no such table)."""
    if not inspect(conn).has_table("parked_events"):
        return 0
    return conn.execute(select(func.count()).select_from(table("parked_events"))).scalar_one()


async def log_head(app: FastAPI) -> Head:
    """The head of the log through the app's connection, if it has one."""
    claim_log: ClaimLog | None = api_state(app).claim_log
    if claim_log is None:
        return Head(None, "the API has no connection to the log, so the head of the log is unknown")
    try:
        return Head(await asyncio.wait_for(claim_log.head(), HEAD_TIMEOUT))
    except Exception as error:  # noqa: BLE001 - an unreachable log is reported, not raised
        return Head(None, f"reading the head of the log failed ({type(error).__name__})")


async def next_in_partition(app: FastAPI, partition: int, after_seq: int) -> int | None:
    """The sequence of the first event of ``partition`` after ``after_seq`` (None: there is none yet);
    raises when the log cannot be read."""
    found = await first_in_partition(api_state(app).claim_log, partition, after_seq)
    return None if found is None else found[0]


async def first_in_partition(claim_log: ClaimLog, partition: int, after_seq: int) -> tuple[int, datetime | None] | None:
    """The sequence and stored time of the first event of ``partition`` after ``after_seq`` (None: none yet)."""
    return await claim_log.first_in_partition(partition, after_seq, timeout=HEAD_TIMEOUT)


async def waiting_since(app: FastAPI, after_seq: int) -> datetime | None:
    """When the first event after ``after_seq`` (the oldest one a projection has not applied) was stored."""
    claim_log: ClaimLog | None = api_state(app).claim_log
    if claim_log is None:
        return None
    try:
        events = await asyncio.wait_for(claim_log.read_log(after_seq=after_seq, limit=1), HEAD_TIMEOUT)
    except Exception:  # noqa: BLE001 - the lag in seconds is then left out
        return None
    return events[0].stored_at if events else None


def seconds_since(moment: datetime) -> float:
    """Seconds from ``moment`` to now (never negative: clocks of two machines may disagree)."""
    return max(0.0, (datetime.now(UTC) - moment).total_seconds())
