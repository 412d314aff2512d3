"""Small SQL helpers shared by projections: dialect-aware upserts and chunked key lookups."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from operator import itemgetter
from typing import Any

from sqlalchemy import Connection, Dialect, Executable, Insert, Table
from sqlalchemy.dialects import postgresql, sqlite

CHUNK = 500  # keys per IN (...) list: well under SQLite's and PostgreSQL's parameter limits


def upsert(conn: Connection, table: Table, rows: Sequence[dict[str, Any]]) -> None:
    """Insert rows, replacing those whose primary key already exists."""
    execute_many(conn, upsert_statement(conn.dialect.name, table), rows)


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
    execute_many(conn, insert_new_statement(conn.dialect.name, table), rows)


@cache
def insert_new_statement(dialect_name: str, table: Table) -> Insert:
    """The insert-if-absent of ``table``, built once."""
    dialect = {"postgresql": postgresql, "sqlite": sqlite}[dialect_name]
    return dialect.insert(table).on_conflict_do_nothing(index_elements=[c.name for c in table.primary_key.columns])


def append_rows(conn: Connection, table: Table, rows: Sequence[dict[str, Any]]) -> None:
    """Insert rows none of which can already be there (a rebuild worker's scratch place): PostgreSQL's
    COPY, which takes rows about ten times as fast as an executemany of inserts; elsewhere an insert
    that skips rows already there (``append_values``)."""
    if rows:
        values_of = itemgetter(*column_names(table))
        append_values(conn, table, [values_of(row) for row in rows])


def insert_new_values(conn: Connection, table: Table, values: Sequence[tuple]) -> int:
    """``insert_new`` of rows given as tuples in the table's column order, for tables that take a row
    per event: a dictionary per row, then its values picked out again, cost more than SQLite's insert.
    Returns the driver's count of rows inserted (see ``dialect.supports_sane_multi_rowcount``)."""
    if not values:
        return 0
    prepared = _prepare(conn.dialect, insert_new_statement(conn.dialect.name, table))
    return conn.exec_driver_sql(prepared.sql, prepared.values(values, column_names(table))).rowcount


def append_values(conn: Connection, table: Table, values: Sequence[tuple]) -> None:
    """``append_rows`` of rows given as tuples in the table's column order."""
    if conn.dialect.name != "postgresql":
        insert_new_values(conn, table, values)
        return
    if not values:
        return
    cursor = conn.connection.driver_connection.cursor()
    with cursor.copy(f'COPY "{table.name}" ({", ".join(column_names(table))}) FROM STDIN') as copy:
        for row in values:
            copy.write_row(row)


@cache
def column_names(table: Table) -> tuple[str, ...]:
    """The table's column names in order: the order of a row given as a tuple."""
    return tuple(c.name for c in table.columns)


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


def execute_many(conn: Connection, statement: Executable, rows: Sequence[dict[str, Any]]) -> None:
    """Run a cached statement once per row (the driver's executemany), rows keyed by parameter name.

    The same SQL and the same bound values as ``conn.execute(statement, rows)``, without SQLAlchemy
    building a parameter dictionary per row and per execution: for the projector's thousands of rows
    a batch, that bookkeeping costs more than SQLite's own work (bench/backlog.py shows it).
    """
    if rows:
        prepared = _prepare(conn.dialect, statement)
        conn.exec_driver_sql(prepared.sql, prepared.parameters(rows))


@dataclass(frozen=True)
class _Prepared:
    sql: str
    names: tuple[str, ...]  # the parameters in order, for a positional paramstyle (SQLite's ``?``)
    processors: tuple[Callable[[Any], Any] | None, ...]  # the types' own conversions (SQLite's datetimes)
    positional: bool

    def parameters(self, rows: Sequence[dict[str, Any]]) -> list:
        if not self.positional:
            converted = [(name, p) for name, p in zip(self.names, self.processors, strict=True) if p is not None]
            if not converted:
                return list(rows)
            out = []
            for row in rows:
                row = dict(row)
                for name, process in converted:
                    if row[name] is not None:
                        row[name] = process(row[name])
                out.append(row)
            return out
        values_of = itemgetter(*self.names)
        if len(self.names) == 1:
            return [(values_of(row),) for row in rows]
        return self._converted([values_of(row) for row in rows])

    def values(self, rows: Sequence[tuple], columns: tuple[str, ...]) -> list:
        """The driver's parameters for rows given as tuples of ``columns``' values."""
        if not self.positional:
            return self.parameters([dict(zip(columns, row, strict=True)) for row in rows])
        if self.names != columns:
            raise ValueError(f"the statement takes {self.names}, the rows give {columns}")
        return self._converted(rows)

    def _converted(self, rows: Sequence[tuple]) -> list:
        """Positional rows with the types' conversions applied."""
        converted = [(i, p) for i, p in enumerate(self.processors) if p is not None]
        if not converted:
            return list(rows)
        out = []
        for row in rows:
            values = list(row)
            for i, process in converted:
                if values[i] is not None:
                    values[i] = process(values[i])
            out.append(tuple(values))
        return out


@cache
def _prepare(dialect: Dialect, statement: Executable) -> _Prepared:
    compiled = statement.compile(dialect=dialect)
    names = tuple(compiled.positiontup) if compiled.positional else tuple(compiled.binds)
    processors = tuple(_bind_processor(compiled.binds[name].type, dialect) for name in names)
    return _Prepared(str(compiled), names, processors, compiled.positional)


def _bind_processor(type_, dialect: Dialect) -> Callable[[Any], Any] | None:
    """The type's own bind conversion on ``dialect`` (SQLite's datetimes to text, for one)."""
    return type_.dialect_impl(dialect).bind_processor(dialect)
