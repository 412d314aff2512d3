"""The schema changes only through Alembic: the migrations build exactly the tables the code declares."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine

from projections.tables import metadata
from services.db import DatabaseNotReadyError, make_engine, require_current


def test_migrations_build_exactly_the_declared_tables(engine: Engine):
    with engine.connect() as conn:
        differences = compare_metadata(MigrationContext.configure(conn), metadata)
    assert differences == [], "declare the change in projections/tables.py and add a reviewed migration"
    require_current(engine)


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
