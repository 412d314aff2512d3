"""What an API process knows of the read models' progress: the checkpoints as the table has them, and,
per partition, how far every event is applied (``Visibility``). Read-your-writes
(``services/read_api/consistency.py``) waits on it; ``ApiState`` keeps one per generation.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from sqlalchemy import Connection, Engine, func, select

from events.subjects import LogLayout
from projections.tables import checkpoints

__all__ = ["Checkpoints", "Visibility", "applied", "read_checkpoints"]


@dataclass(frozen=True)
class Checkpoints:
    """The projections' positions as the checkpoints table has them: ``whole`` for checkpoints that each
    move over the whole log (one projector), else ``partitions`` (partition ->
    lowest checkpoint of its projections; a partition without rows is at 0)."""

    whole: int | None
    partitions: dict[int, int] = field(default_factory=dict)

    def of(self, partition: int) -> int:
        """Every event of ``partition`` at or below this sequence is applied."""
        return self.whole if self.whole is not None else self.partitions.get(partition, 0)

    def lowest(self, count: int) -> int:
        """The lowest checkpoint of ``count`` partitions."""
        return self.whole if self.whole is not None else min(self.of(k) for k in range(max(count, 1)))


def read_checkpoints(conn: Connection, layout: LogLayout | None) -> Checkpoints:
    """The checkpoints, per partition when they were written by the log's partitions' runners."""
    rows = conn.execute(
        select(checkpoints.c.partition, checkpoints.c.partitions, func.min(checkpoints.c.last_seq))
        .group_by(checkpoints.c.partition, checkpoints.c.partitions)
    ).all()
    if layout is not None and layout.partitioned and rows and all(written_for == layout.partitions for _, written_for, _ in rows):
        return Checkpoints(None, {partition: seq for partition, _, seq in rows})
    return Checkpoints(min((seq for _, _, seq in rows), default=0))


def applied(engine: Engine, layout: LogLayout | None = None) -> int:
    """How far every projection has applied the whole log: the lowest checkpoint (0 before any)."""
    with engine.connect() as conn:
        return read_checkpoints(conn, layout).lowest(layout.partitions if layout is not None else 1)


@dataclass
class Visibility:
    """What this API process knows of each partition, for one read-model generation (``engine``).

    ``known[k]``: every event of partition k at or below it is applied (its checkpoint, or one below
    the first event after the checkpoint, as the log said). ``waiting[k]``: that first unapplied event,
    so the log is asked again only once the checkpoint passes it."""

    engine: Engine
    known: dict[int, int] = field(default_factory=dict)
    waiting: dict[int, int] = field(default_factory=dict)

    def behind(self, partitions: Iterable[int], target: int) -> list[int]:
        return [k for k in partitions if self.known.get(k, 0) < target]

    def checkpointed(self, found: Checkpoints, partitions: Iterable[int]) -> None:
        for k in partitions:
            self.known[k] = max(self.known.get(k, 0), found.of(k))
