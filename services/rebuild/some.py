"""Rebuilding some projections, not all: the others' tables are copied from the active generation.

``claimlog replay --projection NAME``, and a projector that finds one projection's version changed,
rebuild only what needs it. Into the new generation, the other projections' tables are copied from
the active one as they stand at one moment (one snapshot, so the rows and their checkpoint agree);
the chosen projections are folded from the first event up to that checkpoint; then every projection
catches up to the head together (services/rebuild/replay.py).

Parked events are the one thing projections share: a claim whose event any projection raised on is
held back from all of them. When the chosen projections alone park other events than the active
tables hold, a partial rebuild would disagree with a full one, so the caller rebuilds everything.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import Engine, insert, select, text

from projections.base import Projection
from projections.registry import build_projections
from projections.tables import checkpoints, claim_pages, parked_events
from services.store.bulk_build import copy_attached, merge_postgresql, rebuild_sqlite_search
from services.store.generations import Generations

Parked = set[tuple[int, str]]  # (sequence, claim) of each parked event


class PartialRebuildDisagrees(RuntimeError):
    """The chosen projections alone park other events than the active generation's tables hold, or the
    active projections did not stand at one position when copied: every projection is rebuilt instead."""


def chosen_projections(names: Iterable[str]) -> list[Projection]:
    """The projections named, in the order they apply; a name that is none of them is a ``ValueError``."""
    projections = build_projections()
    wanted = set(names)
    unknown = sorted(wanted - {p.name for p in projections})
    if unknown:
        raise ValueError(f"no projection {', '.join(unknown)}; the projections are {', '.join(p.name for p in projections)}")
    return [p for p in projections if p.name in wanted]


def copy_others(generations: Generations, number: int, chosen: set[str]) -> tuple[int, Parked]:
    """Copy the tables of every projection not in ``chosen``, and their checkpoints, from the active
    generation into generation ``number``, in one snapshot; returns their position and the parked events."""
    others = [p for p in build_projections() if p.name not in chosen]
    tables = [t.name for p in others for t in p.tables]
    source, target = generations.engine(generations.active_number()), generations.engine(number)
    copy = _copy_sqlite if generations.dialect == "sqlite" else _copy_postgresql
    rows, parked = copy(source, target, tables, [p.name for p in others])
    positions = {row[2] for row in rows}
    if len(positions) > 1:  # projections, or partitions, caught between two batches
        raise PartialRebuildDisagrees(f"the active projections stand at different positions {sorted(positions)}")
    position = positions.pop() if positions else 0
    with target.begin() as conn:
        if rows:  # one row per projection (every partition stands at that position)
            versions = {name: version for name, version, _ in rows}
            conn.execute(insert(checkpoints), [{"name": n, "version": v, "last_seq": position} for n, v in versions.items()])
        if claim_pages.name in tables and generations.dialect == "sqlite":  # the search index of the copied pages
            rebuild_sqlite_search(conn)
    return position, parked


def parked_in(engine: Engine) -> Parked:
    with engine.connect() as conn:
        return {(seq, claim) for seq, claim in conn.execute(select(parked_events.c.seq, parked_events.c.claim_id))}


def _copy_sqlite(source: Engine, target: Engine, tables: list[str], names: list[str]) -> tuple[list, Parked]:
    raw = target.raw_connection()
    try:
        cursor = raw.cursor()
        cursor.execute("ATTACH DATABASE ? AS active", (source.url.database,))
        # One transaction reads the active file from one snapshot (write-ahead-log mode), while its
        # projector goes on writing.
        cursor.execute("BEGIN")
        copy_attached(cursor, "active", tables)
        marks = ", ".join("?" for _ in names)
        rows = cursor.execute(f"SELECT name, version, last_seq FROM active.projection_checkpoints WHERE name IN ({marks})", names).fetchall()
        parked = {(seq, claim) for seq, claim in cursor.execute("SELECT seq, claim_id FROM active.parked_events")}
        raw.commit()
        cursor.execute("DETACH DATABASE active")
    finally:
        raw.close()
    return rows, parked


def _copy_postgresql(source: Engine, target: Engine, tables: list[str], names: list[str]) -> tuple[list, Parked]:
    with source.connect() as conn:
        schema = conn.execute(text("SELECT current_schema()")).scalar_one()
    with target.connect().execution_options(isolation_level="REPEATABLE READ") as conn, conn.begin():
        merge_postgresql(conn, schema, tables)  # every column, the search vector included, triggers off
        rows = conn.execute(
            text(f'SELECT name, version, last_seq FROM "{schema}".projection_checkpoints WHERE name = ANY(:names)'),
            {"names": names},
        ).all()
        parked = {(seq, claim) for seq, claim in conn.execute(text(f'SELECT seq, claim_id FROM "{schema}".parked_events'))}
    return [tuple(row) for row in rows], parked
