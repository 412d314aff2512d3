"""Read your writes: a read that names a log sequence waits (boundedly) until what it shows has applied it.

A write answers with the sequence of its events; a read with ``?after=SEQ`` (or the header
``Claimlog-After: SEQ``) is answered once every event at or below SEQ that the read depends on is
applied, or, after at most the app's ``read_wait`` seconds, with 503 ``not_yet_visible`` saying how
far the projections have got. A sequence past the head of the log was given to no write, so waiting
cannot make it visible: it is answered at once with 422 ``beyond_log_head``.

On a partitioned log each partition has its own checkpoint, moved by whichever worker folds it. A
claim's page depends on its own partition only, so ``/claims/<id>`` (and its text, counts and HTML
page) waits for that partition; a listing, the scorecard or a contributor depends on every partition
and waits for all of them. A partition whose checkpoint is below SEQ is still past it when it holds
no event between its checkpoint and SEQ: the log is asked for the partition's first event after the
checkpoint (one direct get, ``lag.next_in_partition``), so an idle partition never blocks and one slow
partition never holds back the pages of claims in the others. What is learnt is kept per partition
(``Visibility``), and the log is asked again only once that partition's checkpoint has passed the
event it was waiting for.
"""

from __future__ import annotations

import asyncio
import re
import time
from typing import Annotated

from fastapi import FastAPI, Header, HTTPException, Query, Request
from pydantic import WithJsonSchema
from sqlalchemy import select

from events.envelope import CLAIM_ID_PATTERN
from events.subjects import LogLayout
from projections.tables import claim_pages
from services.read_api.api_state import ApiState, api_state
from services.read_api.lag import log_head, next_in_partition
from services.read_api.sequences import SEQ_SCHEMA, Seq
from services.read_api.visibility import Visibility, read_checkpoints

POLL = (0.002, 0.005, 0.01, 0.02, 0.05)
_CLAIM_ID = re.compile(CLAIM_ID_PATTERN)


def visibility(state: ApiState) -> Visibility:
    """The app's ``Visibility`` of the engine it serves now (a new one after a generation switch)."""
    current = state.reads.visibility
    if current is None or current.engine is not state.reads.engine:
        current = state.reads.visibility = Visibility(state.reads.engine)
    return current


def _layout(app: FastAPI) -> LogLayout | None:
    claim_log = api_state(app).claim_log
    return claim_log.layout if claim_log is not None else None


def read_partitions(request: Request, layout: LogLayout | None) -> list[int]:
    """The partitions a read depends on: its claim's, for a read of one claim; every one otherwise."""
    every = list(range(layout.partitions)) if layout is not None and layout.partitioned else [0]
    key = request.path_params.get("claim_key") or request.path_params.get("claim_id")
    if key is None or layout is None or not layout.partitioned:
        return every
    if not _CLAIM_ID.match(key):
        with api_state(request.app).reads.engine.connect() as conn:  # a slug: its claim, once projected
            first = select(claim_pages.c.claim_id).where(claim_pages.c.slug == key).order_by(claim_pages.c.first_seq).limit(1)
            key = conn.execute(first).scalar()  # the slug's owner: the first claim drafted with it
        if key is None:
            return every
    return [layout.partition_of(key)]


AFTER = (
    "Answer once the log's sequence SEQ is applied (read your writes); 503 `not_yet_visible` if that takes longer "
    "than the API waits, 422 `beyond_log_head` for a sequence past the head of the log."
)


async def visible_after(
    request: Request,
    after: Annotated[Seq | None, Query(description=AFTER), WithJsonSchema(SEQ_SCHEMA)] = None,
    claimlog_after: Annotated[Seq | None, Header(description="The same as ?after=, as a header."), WithJsonSchema(SEQ_SCHEMA)] = None,
) -> int | None:
    """Wait until the sequence the request names is applied where the read looks; returns it (None when it names none)."""
    target = max(after or 0, claimlog_after or 0)
    if not target:
        return None
    app, state = request.app, api_state(request.app)
    if state.reads.applied >= target:
        return target
    layout = _layout(app)
    parts = read_partitions(request, layout)
    seen = visibility(state)
    if not seen.behind(parts, target):
        return target
    deadline = time.monotonic() + state.read_wait
    # Primary-key reads of a tiny table: cheaper on the loop than a hop to a worker thread.
    _refresh(state, seen, layout, parts)
    if seen.behind(parts, target):
        named = "after" if (after or 0) >= (claimlog_after or 0) else "Claimlog-After"
        await refuse_beyond_head(app, target, named=named)
        await _wait_until_applied(app, seen, layout, parts, target, deadline)
    return target


def _refresh(state: ApiState, seen: Visibility, layout: LogLayout | None, parts: list[int]) -> None:
    with seen.engine.connect() as conn:
        found = read_checkpoints(conn, layout)
    seen.checkpointed(found, parts)
    count = layout.partitions if layout is not None and layout.partitioned else 1
    state.reads.applied = max(state.reads.applied, found.lowest(count), min(seen.known.get(k, 0) for k in range(count)))


async def _ask_log(app: FastAPI, seen: Visibility, layout: LogLayout | None, parts: list[int], target: int) -> None:
    """For each partition still behind ``target`` whose checkpoint passed what it waited for: its first
    event after the checkpoint, from the log. None at or below ``target``: the partition is past it."""
    if layout is None or not layout.partitioned:
        return  # one checkpoint over the whole log, whose sequences have no gaps: it must reach target
    ask = [k for k in seen.behind(parts, target) if seen.known.get(k, 0) >= seen.waiting.get(k, 0)]
    if not ask:
        return
    firsts = await asyncio.gather(*(next_in_partition(app, k, seen.known.get(k, 0)) for k in ask), return_exceptions=True)
    for k, first in zip(ask, firsts, strict=True):
        if isinstance(first, BaseException):
            continue  # the log cannot be read now: wait for the checkpoint
        if first is None:
            # Nothing after the checkpoint in the whole log: past every sequence up to the head.
            seen.known[k] = max(seen.known.get(k, 0), min(target, api_state(app).reads.log_head))
        else:
            seen.known[k], seen.waiting[k] = max(seen.known.get(k, 0), first - 1), first


async def _wait_until_applied(app: FastAPI, seen: Visibility, layout: LogLayout | None, parts: list[int], target: int, deadline: float) -> None:
    """Poll the checkpoints, more slowly as it goes on, until ``target`` is applied in ``parts``; 503 at ``deadline``."""
    state = api_state(app)
    await _ask_log(app, seen, layout, parts, target)
    for attempt in range(1_000_000):
        if not seen.behind(parts, target):
            return
        left = deadline - time.monotonic()
        if left <= 0:
            break
        await asyncio.sleep(min(POLL[min(attempt, len(POLL) - 1)], left))
        _refresh(state, seen, layout, parts)
        await _ask_log(app, seen, layout, parts, target)
    lowest = min(seen.known.get(k, 0) for k in parts)
    where = "" if len(parts) != 1 or layout is None or not layout.partitioned else f" in partition {parts[0]}"
    raise HTTPException(
        503,
        detail={
            "error": "not_yet_visible",
            "message": f"the read models have applied the log{where} up to {lowest}, not yet {target}, "
            f"after waiting {state.read_wait:g}s; retry",
        },
        headers={"Retry-After": "1"},
    )


async def refuse_beyond_head(app: FastAPI, target: int, *, named: str) -> None:
    """422 ``beyond_log_head`` when ``target`` is past the last sequence in the log. The head is asked for
    only when ``target`` is past the highest one seen; when it cannot be read, the read waits as before."""
    state = api_state(app)
    if target <= state.reads.log_head:
        return
    head = await log_head(app)
    if head.seq is None:
        return
    state.reads.log_head = max(state.reads.log_head, head.seq)
    if target > head.seq:
        raise HTTPException(
            422,
            detail={
                "error": "beyond_log_head",
                "message": f"{named}={target} is beyond the log's last sequence {head.seq}: no write has "
                "been given it, so waiting cannot make it visible",
            },
        )
