"""Read your writes: a read that names a log sequence waits (boundedly) until the projections have applied it.

A write answers with the sequence of its events; a read with ``?after=SEQ`` (or the header
``Claimlog-After: SEQ``) is answered once every projection has applied that sequence, or, after at
most the app's ``read_wait`` seconds, with 503 ``not_yet_visible`` saying how far they have got.
"""

from __future__ import annotations

import asyncio
import time
from typing import Annotated

from fastapi import Header, HTTPException, Query, Request
from sqlalchemy import Engine, func, select

from projections.tables import checkpoints

POLL = (0.002, 0.005, 0.01, 0.02, 0.05)


def applied(engine: Engine) -> int:
    """How far every projection has applied the log: the lowest checkpoint (0 before any)."""
    with engine.connect() as conn:
        return conn.execute(select(func.min(checkpoints.c.last_seq))).scalar() or 0


async def visible_after(
    request: Request,
    after: Annotated[int | None, Query(ge=0, description="Answer once the log's sequence SEQ is applied (read your writes).")] = None,
    claimlog_after: Annotated[int | None, Header(ge=0, description="The same as ?after=, as a header.")] = None,
) -> int | None:
    """Wait until the sequence the request names is applied; returns it (None when it names none)."""
    target = max(after or 0, claimlog_after or 0)
    if not target:
        return None
    state = request.app.state
    if state.applied >= target:
        return target
    deadline = time.monotonic() + state.read_wait
    for attempt in range(1_000_000):
        # A primary-key read of a tiny table: cheaper on the loop than a hop to a worker thread.
        state.applied = max(state.applied, applied(state.engine))
        if state.applied >= target:
            return target
        left = deadline - time.monotonic()
        if left <= 0:
            break
        await asyncio.sleep(min(POLL[min(attempt, len(POLL) - 1)], left))
    raise HTTPException(
        503,
        detail={
            "error": "not_yet_visible",
            "message": f"the read models have applied the log up to {state.applied}, not yet {target}, "
            f"after waiting {state.read_wait:g}s; retry",
        },
        headers={"Retry-After": "1"},
    )
