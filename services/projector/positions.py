"""The checkpoint rows of a partition: registered at 0 for new projections, divided anew for another
number of partitions while they all stand at one position."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from sqlalchemy import Connection, insert, select

from projections.base import Projection
from projections.tables import checkpoints

log = logging.getLogger(__name__)


def claim_rows(conn: Connection, projections: Sequence[Projection], *, partition: int, partitions: int) -> list:
    """The checkpoint rows of ``partition`` of ``partitions`` for every projection (inside the caller's
    transaction, which holds the checkpoints' lock), written first where they are missing."""
    names = [p.name for p in projections]
    rows = conn.execute(select(checkpoints).where(checkpoints.c.name.in_(names))).all()
    if any(row.partitions != partitions for row in rows):
        rows = divide_checkpoints(conn, rows, partitions=partitions)
    known = {row.name for row in rows if row.partition == partition}
    missing = [
        {"name": p.name, "partition": partition, "partitions": partitions, "version": p.version, "last_seq": 0}
        for p in projections if p.name not in known
    ]
    if missing:
        conn.execute(insert(checkpoints), missing)
    query = select(checkpoints).where(checkpoints.c.name.in_(names), checkpoints.c.partition == partition)
    return conn.execute(query).all()


def divide_checkpoints(conn: Connection, rows: Sequence, *, partitions: int) -> list:
    """Replace checkpoints written for another number of partitions (the whole log's one row per
    projection, or one per partition) with ``partitions`` rows per projection, at the position they all
    stand at; an event folded twice would count twice, so they must stand at one."""
    positions = {row.last_seq for row in rows}
    if len(positions) > 1:
        was = sorted({row.partitions for row in rows})
        raise RuntimeError(
            f"the checkpoints were written for {' and '.join(map(str, was))} partition(s) of the log, standing at different "
            f"positions {sorted(positions)}: run the projector as before until they stand at one, or rebuild the read "
            "models with `claimlog replay`"
        )
    versions = {row.name: row.version for row in rows}
    seq = positions.pop()
    conn.execute(checkpoints.delete().where(checkpoints.c.name.in_(list(versions))))
    divided = [
        {"name": name, "partition": partition, "partitions": partitions, "version": version, "last_seq": seq}
        for name, version in versions.items()
        for partition in range(partitions)
    ]
    conn.execute(insert(checkpoints), divided)
    log.info("checkpoints of %s divided into %s partition(s) at sequence %s", sorted(versions), partitions, seq)
    return conn.execute(select(checkpoints).where(checkpoints.c.name.in_(list(versions)))).all()
