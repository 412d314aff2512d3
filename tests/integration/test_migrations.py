"""The schema changes only through Alembic: the migrations build exactly the tables the code declares."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, inspect, text

from projections.tables import (
    POSTGRESQL_SEARCH_COLUMN,
    POSTGRESQL_SEARCH_INDEX,
    SQLITE_SEARCH_TABLES,
    alembic_filters,
    metadata,
)
from services.rebuild.replay import stale_projections
from services.runtime.db import DatabaseNotReadyError, alembic_config, make_engine, require_current, upgrade
from tests.conftest import _postgres_database


def test_migrations_build_exactly_the_declared_tables(engine: Engine):
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts=alembic_filters(conn.dialect.name))
        differences = compare_metadata(context, metadata)
    assert differences == [], "declare the change in projections/tables.py and add a reviewed migration"
    require_current(engine)


def test_only_the_full_text_search_objects_are_left_out_of_that_comparison(engine: Engine):
    include_name = alembic_filters(engine.dialect.name)["include_name"]
    inspector, on_pages = inspect(engine), {"table_name": "claim_pages", "schema_name": None}
    left_out = {("table", name) for name in inspector.get_table_names() if not include_name(name, "table", {})}
    left_out |= {("column", c["name"]) for c in inspector.get_columns("claim_pages") if not include_name(c["name"], "column", on_pages)}
    left_out |= {("index", i["name"]) for i in inspector.get_indexes("claim_pages") if not include_name(i["name"], "index", on_pages)}
    if engine.dialect.name == "sqlite":
        assert left_out == {("table", name) for name in SQLITE_SEARCH_TABLES}
    else:
        assert left_out == {("column", POSTGRESQL_SEARCH_COLUMN), ("index", POSTGRESQL_SEARCH_INDEX)}


def test_services_refuse_a_database_that_was_not_migrated(database_url: str):
    engine = make_engine(database_url)
    with pytest.raises(DatabaseNotReadyError, match="run `claimlog db upgrade`"):
        require_current(engine)
    engine.dispose()


def test_a_database_of_a_newer_claimlog_is_refused_by_name_and_left_at_its_revision(engine: Engine):
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '0999'"))
    with pytest.raises(DatabaseNotReadyError, match="schema revision 0999, which this claimlog does not know"):
        upgrade(engine)
    with engine.connect() as conn:
        assert MigrationContext.configure(conn).get_current_revision() == "0999"


def test_db_upgrade_from_the_command_line(tmp_path: Path):
    env = {**os.environ, "CLAIMLOG_DATA_DIR": str(tmp_path / "data")}
    result = subprocess.run(
        [sys.executable, "-m", "services.cli", "db", "upgrade"], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    engine = make_engine(f"sqlite:///{tmp_path / 'data' / 'claimlog.sqlite3'}")
    require_current(engine)
    engine.dispose()


def test_page_documents_are_compressed_with_lz4_on_postgresql_and_back_with_pglz_on_downgrade():
    compression = text(
        "SELECT attrelid::regclass::text, attcompression FROM pg_attribute "
        "WHERE attname = 'doc' AND attrelid IN ('claim_pages'::regclass, 'page_snapshots'::regclass) ORDER BY 1"
    )
    for url in _postgres_database():
        engine = make_engine(url)
        try:
            upgrade(engine)
            with engine.connect() as conn:
                assert conn.execute(compression).all() == [("claim_pages", "l"), ("page_snapshots", "l")]
            command.downgrade(alembic_config(engine), "0011")
            with engine.connect() as conn:
                assert conn.execute(compression).all() == [("claim_pages", "p"), ("page_snapshots", "p")]
        finally:
            engine.dispose()


def test_a_downgrade_below_the_shares_refuses_while_shares_stand_apart_and_keeps_one_row_each_once_level(engine: Engine):
    command.downgrade(alembic_config(engine), "0013")  # the refusal leaves the revisions above it as they were
    rows = text("INSERT INTO projection_checkpoints (name, share, shares, version, last_seq) VALUES (:n, :s, 2, 1, :seq)")
    with engine.begin() as conn:
        conn.execute(rows, [{"n": "claim_pages", "s": 0, "seq": 40}, {"n": "claim_pages", "s": 1, "seq": 42}])
    with pytest.raises(RuntimeError, match=r"shares stand at different positions for \['claim_pages'\]"):
        command.downgrade(alembic_config(engine), "0012")
    with engine.begin() as conn:
        conn.execute(text("UPDATE projection_checkpoints SET last_seq = 42"))
    command.downgrade(alembic_config(engine), "0012")
    with engine.connect() as conn:
        assert conn.execute(text("SELECT name, version, last_seq FROM projection_checkpoints")).all() == [("claim_pages", 1, 42)]
    upgrade(engine)


def test_checkpoint_rows_keep_their_partition_and_position_when_their_columns_are_renamed(engine: Engine):
    command.downgrade(alembic_config(engine), "0015")  # the columns named share and shares
    row = text("INSERT INTO projection_checkpoints (name, share, shares, version, last_seq, epoch) VALUES ('claim_pages', 3, 16, 1, 42, 7)")
    with engine.begin() as conn:
        conn.execute(row)
    upgrade(engine)
    with engine.connect() as conn:
        kept = conn.execute(text('SELECT name, "partition", partitions, version, last_seq, epoch FROM projection_checkpoints')).all()
    assert kept == [("claim_pages", 3, 16, 1, 42, 7)]
    command.downgrade(alembic_config(engine), "0015")
    with engine.connect() as conn:
        assert conn.execute(text("SELECT share, shares, last_seq FROM projection_checkpoints")).all() == [(3, 16, 42)]
    upgrade(engine)


def test_folded_events_gain_the_actor_in_their_key_and_the_projections_are_rebuilt_from_the_log(engine: Engine):
    command.downgrade(alembic_config(engine), "0016")  # folded events keyed by event id and claim
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO folded_events (event_id, claim_id, seq) VALUES ('e1', 'CLM-0001', 5)"))
        conn.execute(text(
            'INSERT INTO projection_checkpoints (name, "partition", partitions, version, last_seq, epoch) VALUES '
            "('claim_pages', 0, 1, 8, 42, 0), ('contributors', 0, 1, 3, 42, 0)"
        ))
    upgrade(engine)
    assert inspect(engine).get_pk_constraint("folded_events")["constrained_columns"] == ["event_id", "claim_id", "actor_id"]
    with engine.begin() as conn:
        # Rows without their actor cannot stand: the table is filled again by the rebuild the versions ask for.
        assert conn.execute(text("SELECT count(*) FROM folded_events")).scalar() == 0
        rows = "('e1', 'CLM-0001', 'ada', 5), ('e1', 'CLM-0001', 'grace', 6)"
        conn.execute(text(f"INSERT INTO folded_events (event_id, claim_id, actor_id, seq) VALUES {rows}"))
    assert stale_projections(engine) == {"claim_pages": (8, 11), "contributors": (3, 6)}
    command.downgrade(alembic_config(engine), "0016")
    assert inspect(engine).get_pk_constraint("folded_events")["constrained_columns"] == ["event_id", "claim_id"]
    upgrade(engine)
