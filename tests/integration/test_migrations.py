"""The schema changes only through Alembic: the migrations build exactly the tables the code declares."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, inspect

from projections.tables import SQLITE_SEARCH_TABLES, alembic_filters, metadata
from services.db import DatabaseNotReadyError, make_engine, require_current


# Alembic cannot reflect SQLite's expression indexes; the PostgreSQL-only search index is compared there.
@pytest.mark.filterwarnings("ignore:autogenerate skipping metadata-specified expression-based index")
def test_migrations_build_exactly_the_declared_tables(engine: Engine):
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts=alembic_filters(conn.dialect.name))
        differences = compare_metadata(context, metadata)
    assert differences == [], "declare the change in projections/tables.py and add a reviewed migration"
    require_current(engine)


def test_only_the_sqlite_search_table_is_left_out_of_that_comparison(engine: Engine):
    include_name = alembic_filters(engine.dialect.name)["include_name"]
    left_out = {name for name in inspect(engine).get_table_names() if not include_name(name, "table", {})}
    assert left_out == (SQLITE_SEARCH_TABLES if engine.dialect.name == "sqlite" else set())
    search_indexes = [ix for ix in inspect(engine).get_indexes("claim_pages") if ix["name"] == "ix_claim_pages_statement_search"]
    assert len(search_indexes) == (engine.dialect.name == "postgresql")


def test_services_refuse_a_database_that_was_not_migrated(database_url: str):
    engine = make_engine(database_url)
    with pytest.raises(DatabaseNotReadyError, match="run `claimlog db upgrade`"):
        require_current(engine)
    engine.dispose()


def test_db_upgrade_from_the_command_line(tmp_path: Path):
    env = {**os.environ, "CLAIMLOG_DATA_DIR": str(tmp_path / "data")}
    result = subprocess.run(
        [sys.executable, "-m", "services.cli", "db", "upgrade"], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    engine = make_engine(f"sqlite:///{tmp_path / 'data' / 'claimlog.sqlite3'}")
    require_current(engine)
    engine.dispose()
