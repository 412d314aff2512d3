"""Read your writes: a read that names a log sequence waits (boundedly) until the projections have applied it.

A write answers with the sequence of its events; a read with ``?after=SEQ`` (or the header
``Claimlog-After: SEQ``) is answered once every projection has applied that sequence, or, after at
most the app's ``read_wait`` seconds, with 503 ``not_yet_visible`` saying how far they have got.
A sequence past the head of the log was given to no write, so waiting cannot make it visible: it is
answered at once with 422 ``beyond_log_head``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Annotated

from fastapi import FastAPI, Header, HTTPException, Query, Request
from sqlalchemy import Engine, func, select
from starlette.datastructures import State

from projections.tables import checkpoints
from services.read_api.lag import log_head
from services.read_api.sequences import Seq

POLL = (0.002, 0.005, 0.01, 0.02, 0.05)


def applied(engine: Engine) -> int:
    """How far every projection has applied the log: the lowest checkpoint (0 before any)."""
    with engine.connect() as conn:
        return conn.execute(select(func.min(checkpoints.c.last_seq))).scalar() or 0


async def visible_after(
    request: Request,
    after: Annotated[Seq | None, Query(description="Answer once the log's sequence SEQ is applied (read your writes).")] = None,
    claimlog_after: Annotated[Seq | None, Header(description="The same as ?after=, as a header.")] = None,
) -> int | None:
    """Wait until the sequence the request names is applied; returns it (None when it names none)."""
    target = max(after or 0, claimlog_after or 0)
    if not target:
        return None
    state = request.app.state
    if state.applied >= target:
        return target
    deadline = time.monotonic() + state.read_wait
    # A primary-key read of a tiny table: cheaper on the loop than a hop to a worker thread.
    state.applied = max(state.applied, applied(state.engine))
    if state.applied < target:
        named = "after" if (after or 0) >= (claimlog_after or 0) else "Claimlog-After"
        await refuse_beyond_head(request.app, target, named=named)
        await _wait_until_applied(state, target, deadline)
    return target


async def _wait_until_applied(state: State, target: int, deadline: float) -> None:
    """Poll the checkpoints, more slowly as it goes on, until ``target`` is applied; 503 at ``deadline``."""
    for attempt in range(1_000_000):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        await asyncio.sleep(min(POLL[min(attempt, len(POLL) - 1)], left))
        state.applied = max(state.applied, applied(state.engine))
        if state.applied >= target:
            return
    raise HTTPException(
        503,
        detail={
            "error": "not_yet_visible",
            "message": f"the read models have applied the log up to {state.applied}, not yet {target}, "
            f"after waiting {state.read_wait:g}s; retry",
        },
        headers={"Retry-After": "1"},
    )


async def refuse_beyond_head(app: FastAPI, target: int, *, named: str) -> None:
    """422 ``beyond_log_head`` when ``target`` is past the last sequence in the log. The head is asked for
    only when ``target`` is past the highest one seen; when it cannot be read, the read waits as before."""
    if target <= app.state.log_head:
        return
    head = await log_head(app)
    if head.seq is None:
        return
    app.state.log_head = max(app.state.log_head, head.seq)
    if target > head.seq:
        raise HTTPException(
            422,
            detail={
                "error": "beyond_log_head",
                "message": f"{named}={target} is beyond the log's last sequence {head.seq}: no write has "
                "been given it, so waiting cannot make it visible",
            },
        )
