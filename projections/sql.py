"""Small SQL helpers shared by projections: dialect-aware upserts and chunked key lookups."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from sqlalchemy import Connection, Table
from sqlalchemy.dialects import postgresql, sqlite

CHUNK = 500  # keys per IN (...) list: well under SQLite's and PostgreSQL's parameter limits


def upsert(conn: Connection, table: Table, rows: Sequence[dict[str, Any]]) -> None:
    """Insert rows, replacing those whose primary key already exists."""
    if not rows:
        return
    dialect = {"postgresql": postgresql, "sqlite": sqlite}[conn.dialect.name]
    statement = dialect.insert(table)
    keys = [c.name for c in table.primary_key.columns]
    statement = statement.on_conflict_do_update(
        index_elements=keys,
        set_={c.name: statement.excluded[c.name] for c in table.columns if c.name not in keys},
    )
    conn.execute(statement, list(rows))


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
