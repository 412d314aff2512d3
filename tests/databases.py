"""Test databases made from templates: migrated once per run, copied for each test.

Running the migrations costs far more than copying their result, and every test that takes ``engine``
wants a migrated database. A run migrates one SQLite file and one PostgreSQL database (``CREATE
DATABASE ... TEMPLATE`` of it copies the files on the server); each test then gets a copy of its own,
as independent as a freshly migrated one. Tests that want an empty database (the migrations' own
tests, the "not migrated" errors) still get one.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url

from services.runtime.db import make_engine, upgrade

POSTGRES_URL = os.environ.get("CLAIMLOG_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


def _admin() -> Engine:
    return create_engine(POSTGRES_URL.replace("postgresql://", "postgresql+psycopg://"), isolation_level="AUTOCOMMIT")


def _named(database: str) -> str:
    return make_url(POSTGRES_URL).set(database=database).render_as_string(hide_password=False)


class Templates:
    """The run's migrated templates, made on first use and removed with ``close``."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._sqlite: Path | None = None
        self._postgres: str | None = None  # the template database's name

    def sqlite_copy(self, path: Path) -> None:
        """A migrated SQLite database at ``path`` (which must not exist yet)."""
        if self._sqlite is None:
            template = self._directory / "template.sqlite3"
            _migrate(f"sqlite:///{template}")
            self._sqlite = template
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self._sqlite, path)

    def postgres_template(self) -> str:
        """The name of the migrated PostgreSQL template (no connection stays open on it)."""
        if self._postgres is None:
            name = f"claimlog_template_{uuid.uuid4().hex[:12]}"
            _create(name)
            _migrate(_named(name))
            self._postgres = name
        return self._postgres

    def close(self) -> None:
        if self._postgres is not None:
            _drop(self._postgres)
            self._postgres = None


def _migrate(url: str) -> None:
    engine = make_engine(url)
    try:
        upgrade(engine)
    finally:
        engine.dispose()  # a template must have no open connection (SQLite: its write-ahead log folded in)


def _create(name: str, template: str | None = None) -> None:
    admin = _admin()
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else "")))
    finally:
        admin.dispose()


def _drop(name: str) -> None:
    admin = _admin()
    try:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


def postgres_database(template: str | None = None) -> Iterator[str]:
    """A database of its own on the test PostgreSQL, empty or a copy of ``template``; dropped afterwards."""
    name = f"claimlog_test_{uuid.uuid4().hex[:12]}"
    _create(name, template)
    try:
        yield _named(name)
    finally:
        _drop(name)


def migrated_database(templates: Templates, kind: str, directory: Path, file: str) -> Iterator[str]:
    """The URL of a migrated database of ``kind`` (``sqlite`` or ``postgresql``) made from the template."""
    if kind == "sqlite":
        path = directory / file
        templates.sqlite_copy(path)
        yield f"sqlite:///{path}"
    else:
        yield from postgres_database(templates.postgres_template())
