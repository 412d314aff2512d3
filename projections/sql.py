"""Small SQL helpers shared by projections: dialect-aware upserts and chunked key lookups."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from functools import cache
from typing import Any

from sqlalchemy import Connection, Insert, Table
from sqlalchemy.dialects import postgresql, sqlite

CHUNK = 500  # keys per IN (...) list: well under SQLite's and PostgreSQL's parameter limits


def upsert(conn: Connection, table: Table, rows: Sequence[dict[str, Any]]) -> None:
    """Insert rows, replacing those whose primary key already exists."""
    if rows:
        conn.execute(upsert_statement(conn.dialect.name, table), list(rows))


@cache
def upsert_statement(dialect_name: str, table: Table) -> Insert:
    """The upsert of ``table``, built once: building it per batch cost more than the batch's SQL
    (SQLAlchemy derives the ``excluded`` columns and a cache key each time)."""
    dialect = {"postgresql": postgresql, "sqlite": sqlite}[dialect_name]
    statement = dialect.insert(table)
    keys = [c.name for c in table.primary_key.columns]
    return statement.on_conflict_do_update(
        index_elements=keys,
        set_={c.name: statement.excluded[c.name] for c in table.columns if c.name not in keys},
    )


def insert_new(conn: Connection, table: Table, rows: Sequence[dict[str, Any]]) -> None:
    """Insert rows, skipping those whose primary key exists (so a fenced-off projector fails on its checkpoint,
    with a clear error, rather than on a duplicate key)."""
    if rows:
        conn.execute(insert_new_statement(conn.dialect.name, table), list(rows))


@cache
def insert_new_statement(dialect_name: str, table: Table) -> Insert:
    """The insert-if-absent of ``table``, built once."""
    dialect = {"postgresql": postgresql, "sqlite": sqlite}[dialect_name]
    return dialect.insert(table).on_conflict_do_nothing(index_elements=[c.name for c in table.primary_key.columns])


def chunks(items: Iterable[Any], size: int = CHUNK) -> Iterator[list[Any]]:
    """Consecutive lists of at most ``size`` items."""
    chunk: list[Any] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
