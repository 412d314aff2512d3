"""Who folds each partition of the log, at which epoch, and how far behind it is: what ``GET /health``
and ``claimlog status`` show of the projector workers.

Three sources, each the authority for its part: the leases bucket (``services/projector/leases.py``)
says which live worker holds each partition and at which epoch (the lease's revision), the checkpoints
table says how far each partition is applied (and the epoch of the owner that last took it), and the
log says each partition's last event and the first one not yet applied (its stored time is the lag in
seconds). A partition no live worker holds is listed apart: nothing folds it until one takes it.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

from nats.js.errors import NotFoundError
from sqlalchemy import Engine, func, select

from projections.tables import checkpoints
from services.log import ClaimLog
from services.log.buckets import find_bucket
from services.log.names import LEASES, leases_bucket
from services.projector.leases import Leases
from services.read_api.lag import HEAD_TIMEOUT, first_in_partition, seconds_since


def checkpoint_rows(engine: Engine, partitions: int) -> tuple[str, dict[int, tuple[int, int]]]:
    """How the checkpoints are kept (``"per partition"`` or ``"whole log"``) and, per partition, its lowest
    checkpoint over the projections and the epoch of the owner that last took it."""
    with engine.connect() as conn:
        rows = conn.execute(
            select(checkpoints.c.partition, checkpoints.c.partitions, func.min(checkpoints.c.last_seq), func.max(checkpoints.c.epoch))
            .group_by(checkpoints.c.partition, checkpoints.c.partitions)
        ).all()
    if rows and all(written_for == partitions for _, written_for, _, _ in rows):
        found = {partition: (seq, epoch) for partition, _, seq, epoch in rows}
        return "per partition", {k: found.get(k, (0, 0)) for k in range(partitions)}
    lowest = min((seq for _, _, seq, _ in rows), default=0)
    return "whole log", {k: (lowest, 0) for k in range(partitions)}


async def leases_of(claim_log: ClaimLog, partitions: int) -> tuple[dict[int, tuple[str, int]], list[str]]:
    """Who holds each partition's live lease at which epoch, and the live workers (none without the bucket)."""
    js = claim_log.nc.jetstream(timeout=HEAD_TIMEOUT)
    kv = await find_bucket(js, LEASES, stream=claim_log.stream)
    if kv is None:
        return {}, []
    leases = Leases(kv, "", js=js, bucket=leases_bucket(claim_log.stream))
    return await leases.holders(partitions), await leases.workers()


async def partition_head(claim_log: ClaimLog, partition: int) -> int:
    """The sequence of the partition's last event (0 when it has none)."""
    js = claim_log.nc.jetstream(timeout=HEAD_TIMEOUT)
    try:
        return (await js.get_last_msg(claim_log.stream, claim_log.layout.partition_filter(partition), direct=True)).seq or 0
    except NotFoundError:
        return 0


async def partition_report(claim_log: ClaimLog, engine: Engine) -> dict[str, Any] | None:
    """Each worker with the partitions it holds (epoch, checkpoint, last event, lag), and the partitions
    nobody holds; None for a log that is not partitioned. Raises when the log or the database cannot be read."""
    count = claim_log.layout.partitions
    if not claim_log.layout.partitioned:
        return None
    kept, rows = await asyncio.to_thread(checkpoint_rows, engine, count)
    (holders, live), heads = await asyncio.gather(
        leases_of(claim_log, count), asyncio.gather(*(partition_head(claim_log, k) for k in range(count)))
    )
    behind = [k for k in range(count) if heads[k] > rows[k][0]]
    firsts = await asyncio.gather(*(first_in_partition(claim_log, k, rows[k][0]) for k in behind))
    oldest: dict[int, datetime | None] = {k: found[1] if found else None for k, found in zip(behind, firsts, strict=True)}

    def partition(k: int) -> dict[str, Any]:
        last_seq, checkpoint_epoch = rows[k]
        entry: dict[str, Any] = {"partition": k, "last_seq": last_seq, "head": heads[k], "checkpoint_epoch": checkpoint_epoch}
        if k in holders:
            entry["epoch"] = holders[k][1]
        entry["lag_seq"] = max(0, heads[k] - last_seq)  # sequences of the whole log between them, not events
        moment = oldest.get(k)
        entry["lag_seconds"] = round(seconds_since(moment), 3) if moment is not None else 0.0
        return entry

    workers: dict[str, dict[str, Any]] = {name: {"live": True, "partitions": []} for name in live}
    for k, (owner, _epoch) in sorted(holders.items()):
        workers.setdefault(owner, {"live": False, "partitions": []})["partitions"].append(partition(k))
    for worker in workers.values():
        held = worker["partitions"]
        worker["owns"] = [p["partition"] for p in held]
        worker["epoch"] = max((p["epoch"] for p in held), default=None)
        worker["lag_seconds"] = max((p["lag_seconds"] for p in held), default=0.0)
        worker["behind"] = [p["partition"] for p in held if p["head"] > p["last_seq"]]
    return {
        "partitions": count,
        "checkpoints": kept,
        "workers": dict(sorted(workers.items())),
        "unowned": [partition(k) for k in range(count) if k not in holders],
    }


async def partition_section(claim_log: ClaimLog | None, engine: Engine) -> dict[str, Any] | None:
    """``partition_report``, or why it cannot be given (the rest of a health report stands without it)."""
    if claim_log is None:
        return None
    try:
        return await partition_report(claim_log, engine)
    except Exception as error:  # noqa: BLE001 - a report that cannot be made says so and lets the others through
        return {"unknown": f"reading the partitions' owners and positions failed ({type(error).__name__}: {error})"}
