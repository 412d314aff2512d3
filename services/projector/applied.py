"""How far the read models are applied: the one definition of a projection's position in the log.

A projection's position is the largest log sequence at or below which every event is applied. On a
partitioned log each partition keeps its own checkpoint, the sequence of the last of its events a
worker applied, so the lowest checkpoint is not the position: a partition with nothing beyond its
checkpoint is caught up however low that checkpoint stands (one that never held an event stays at 0).
The position is, over the partitions, the sequence just before each one's first event not yet
applied, or the head of the log for a partition with none. Only the log can say which partitions hold
events beyond their checkpoints; checkpoints of the whole log (an unpartitioned log, or a rebuilt
generation before a worker divides them) say the position by themselves. Health, readiness, status,
the metrics, the scorecard, ``replay --diff`` and a runner starting over several partitions all read it here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, Engine, select

from projections.tables import checkpoints
from services.log import ClaimLog

NO_LOG = "the API has no connection to the log, so the head of the log is unknown"
NO_POSITION = (
    "with no connection to the log, which partitions hold events beyond their checkpoints is unknown, "
    "so the position is unknown"
)


@dataclass(frozen=True)
class Kept:
    """The checkpoint rows: per projection, each partition's (or the whole log's) last applied sequence."""

    rows: dict[str, dict[int, int]]
    partitions: frozenset[int]  # how many partitions the rows were written for (1: the whole log)

    def per_partition(self, partitions: int) -> bool:
        """Whether the rows are one per partition of a log of ``partitions``, each at its own partition's event."""
        return partitions > 0 and self.partitions == {partitions}


@dataclass(frozen=True)
class Applied:
    """Each projection's position and the head of the log, each None with ``unknown`` saying why."""

    head: int | None
    positions: dict[str, int | None]
    unknown: str | None = None

    def lag(self) -> dict[str, int | None]:
        """Sequences of the log beyond each projection's position (None where either is unknown)."""
        return {
            name: None if self.head is None or seq is None else max(0, self.head - seq) for name, seq in self.positions.items()
        }


def read_checkpoints(conn: Connection) -> Kept:
    """The checkpoint rows as they stand, in one read."""
    rows: dict[str, dict[int, int]] = {}
    written_for = set()
    for row in conn.execute(select(checkpoints.c.name, checkpoints.c.partition, checkpoints.c.partitions, checkpoints.c.last_seq)):
        rows.setdefault(row.name, {})[row.partition] = row.last_seq
        written_for.add(row.partitions)
    return Kept(rows, frozenset(written_for))


async def applied_through(claim_log: ClaimLog, partition_checkpoints: Mapping[int, int], *, head: int, timeout: float | None = None) -> int:
    """The largest sequence at or below which every event of these partitions is applied, given each
    one's checkpoint and the head of the log read after them (a partition's later events lie above it)."""
    partitions = sorted(partition_checkpoints)
    firsts = await asyncio.gather(
        *(claim_log.first_in_partition(k, partition_checkpoints[k], timeout=timeout) for k in partitions)
    )
    return min(
        (min(found[0] - 1, head) if found is not None else head for found in firsts),
        default=head,
    )


async def applied(claim_log: ClaimLog | None, engine: Engine, names: Sequence[str] = (), *, timeout: float | None = None) -> Applied:
    """Each projection's position (``names`` too, at 0 before its first checkpoint) and the head of the
    log; raises when the database cannot be read, and says why what the log would tell is unknown."""
    kept = await asyncio.to_thread(_read, engine)
    names = list(dict.fromkeys([*names, *kept.rows]))
    if claim_log is None:
        if kept.partitions - {1}:
            return Applied(None, dict.fromkeys(names), NO_POSITION)
        return Applied(None, _lowest(kept, names), NO_LOG)
    per_partition = kept.per_partition(claim_log.layout.partitions)
    try:
        head = await _head(claim_log, timeout)  # after the checkpoints: an event after it lies above it
    except Exception as error:  # noqa: BLE001 - an unreachable log leaves the head unknown, not an error
        why = f"reading the head of the log failed ({type(error).__name__})"
        return Applied(None, dict.fromkeys(names) if per_partition else _lowest(kept, names), why)
    if not per_partition:
        return Applied(head, _lowest(kept, names))
    try:
        bounds = await _bounds(claim_log, kept, claim_log.layout.partitions, head=head, timeout=timeout)
    except Exception as error:  # noqa: BLE001 - as above: the position is then unknown
        return Applied(head, dict.fromkeys(names), f"reading the partitions' first events beyond their checkpoints failed ({type(error).__name__})")
    return Applied(head, {name: min(bounds[name].values(), default=head) if name in bounds else 0 for name in names})


def _lowest(kept: Kept, names: list[str]) -> dict[str, int | None]:
    """Checkpoints of the whole log say the position alone."""
    return {name: min(kept.rows.get(name, {}).values(), default=0) for name in names}


async def _bounds(claim_log: ClaimLog, kept: Kept, partitions: int, *, head: int, timeout: float | None) -> dict[str, dict[int, int]]:
    """Per projection and partition, the sequence at or below which that partition's events are applied
    (each distinct checkpoint asked of the log once: the projections mostly stand together)."""
    asked = sorted({(k, rows.get(k, 0)) for rows in kept.rows.values() for k in range(partitions)})
    answers = await asyncio.gather(*(applied_through(claim_log, {k: seq}, head=head, timeout=timeout) for k, seq in asked))
    known = dict(zip(asked, answers, strict=True))
    return {name: {k: known[k, rows.get(k, 0)] for k in range(partitions)} for name, rows in kept.rows.items()}


async def _head(claim_log: ClaimLog, timeout: float | None) -> int:
    return await asyncio.wait_for(claim_log.head(), timeout)


def _read(engine: Engine) -> Kept:
    with engine.connect() as conn:
        return read_checkpoints(conn)
