"""Building a generation's tables in bulk: secondary indexes and search triggers off while rows pour in.

A rebuild's workers write every page and every activity row into places of their own, which are then
merged into the new generation. Keeping a dozen indexes and the full-text search index up to date row
by row, twice over (in the worker's place, then in the merge), cost more than the rows themselves.
So the workers' scratch places have none (``drop_secondary``), the generation has none while the
merge copies the rows in, and ``restore_secondary`` then creates each index once over the whole table
(a sort) and fills the search index in one pass, before the generation's projector catches up.

The indexes are the ones the tables declare (projections/tables.py); the SQLite search triggers are
migration 0003's, the only place they are defined, less the insert trigger migration 0010 dropped, so
the restored schema is the one Alembic built. On PostgreSQL the search triggers stay throughout: each
page's search vector is computed as it is inserted (migration 0011), by the worker that folds it, and
the merge copies it (``merge_postgresql``, every column the worker's table has); only the search
index is dropped and built again.
"""

from __future__ import annotations

import importlib

from sqlalchemy import Connection, Engine, text

from projections.tables import CONTROL_TABLES, metadata

_SEARCH = importlib.import_module("migrations.versions.0003_listing_search")
_SQLITE_SEARCH = importlib.import_module("migrations.versions.0010_search_insert_by_projector")
SEARCH_TRIGGERS = ("insert", "update", "delete")
# SQLite maps at most this much of a file (its compiled-in ceiling is just under 2 GiB); beyond it, reads copy.
INDEX_MMAP_BYTES = 2_000_000_000


def _read_model_tables():
    return [t for t in metadata.sorted_tables if t.name not in CONTROL_TABLES]


def drop_secondary(engine: Engine) -> None:
    """Drop every secondary index and the search triggers of the read-model tables (kept: primary keys)."""
    with engine.begin() as conn:
        for table in _read_model_tables():
            for index in table.indexes:
                conn.execute(text(f'DROP INDEX IF EXISTS "{index.name}"'))
        if engine.dialect.name == "sqlite":
            for trigger in SEARCH_TRIGGERS:
                conn.execute(text(f"DROP TRIGGER IF EXISTS claim_pages_search_{trigger}"))
        else:
            conn.execute(text("DROP INDEX IF EXISTS ix_claim_pages_statement_search"))


def restore_secondary(engine: Engine) -> None:
    """Create the indexes and search triggers ``drop_secondary`` dropped, and index every statement."""
    sqlite = engine.dialect.name == "sqlite"
    with engine.begin() as conn:
        if sqlite:
            # Each index reads the whole table, and a page's row holds its document (several KB):
            # nine indexes read the pages' table nine times. Read through a memory map, not a copy
            # per page from the OS (the rows were just written, so they are in its cache): the
            # index phase of a rebuild is shorter this way (docs/architecture.md).
            conn.exec_driver_sql(f"PRAGMA mmap_size={INDEX_MMAP_BYTES}")
        for table in _read_model_tables():
            for index in table.indexes:
                index.create(conn, checkfirst=True)
        if sqlite:
            rebuild_sqlite_search(conn)
            for trigger in _SQLITE_SEARCH.SQLITE_TRIGGERS:
                conn.execute(text(trigger))
            conn.exec_driver_sql("PRAGMA mmap_size=0")  # the connection goes back to the pool as it came
        else:
            conn.execute(text(next(s for s in _SEARCH.POSTGRESQL_SEARCH if s.startswith("CREATE INDEX"))))


def merge_sqlite(target: Engine, files: list[str], tables: list[str]) -> None:
    """Append the rows of ``tables`` in each SQLite file to the same tables of ``target``, every column the file has."""
    raw = target.raw_connection()
    try:
        cursor = raw.cursor()
        for file in files:
            cursor.execute("ATTACH DATABASE ? AS part", (file,))
            copy_attached(cursor, "part", tables)
            raw.commit()
            cursor.execute("DETACH DATABASE part")
    finally:
        raw.close()


def copy_attached(cursor, alias: str, tables: list[str]) -> None:
    """SQLite: append the rows of ``tables`` in the attached database ``alias`` to the same tables of the
    main one, every column the attached tables have."""
    for name in tables:
        columns = ", ".join(f'"{row[1]}"' for row in cursor.execute(f'PRAGMA {alias}.table_info("{name}")'))
        cursor.execute(f'INSERT INTO main."{name}" ({columns}) SELECT {columns} FROM {alias}."{name}"')


def rebuild_sqlite_search(conn: Connection) -> None:
    """SQLite: fill the full-text index from every claim page (rows copied in bulk have no entries)."""
    conn.execute(text("INSERT INTO claim_pages_search(claim_pages_search) VALUES ('rebuild')"))


_PLACE_COLUMNS = text(
    "SELECT column_name FROM information_schema.columns WHERE table_schema = :schema AND table_name = :table ORDER BY ordinal_position"
)


def merge_postgresql(conn: Connection, schema: str, tables: list[str]) -> None:
    """Append the rows of ``tables`` in ``schema`` to the same tables on ``conn``'s search path, every column the schema's have."""
    for name in tables:
        columns = ", ".join(f'"{c}"' for c in conn.execute(_PLACE_COLUMNS, {"schema": schema, "table": name}).scalars())
        # The table's own triggers (a page's search vector, computed on insert) are off for the copy: the
        # copied rows carry what the worker's triggers computed.
        conn.execute(text(f'ALTER TABLE "{name}" DISABLE TRIGGER USER'))
        conn.execute(text(f'INSERT INTO "{name}" ({columns}) SELECT {columns} FROM "{schema}"."{name}"'))
        conn.execute(text(f'ALTER TABLE "{name}" ENABLE TRIGGER USER'))
