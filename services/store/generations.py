"""Read-model generations: sets of read-model tables, one of them active, so a rebuild never takes the site down.

Generation 0 is the tables of the home database (CLAIMLOG_DATABASE_URL). ``claimlog replay`` builds
generation N beside it, from the first event of the log, while the API keeps serving the active one:
in SQLite a sibling file (``claimlog.g3.sqlite3``), in PostgreSQL a schema (``claimlog_g3``) of the
same database. When N has caught up with the log, one transaction in the home database makes it the
active generation; the API and the projector each notice within a second and move to it. The old
generation stays, retired, until ``claimlog replay --drop-old``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import Engine, delete, func, insert, select, text, update
from sqlalchemy.engine import make_url

from projections.tables import CONTROL_TABLES, metadata, read_model_generations
from services.runtime.db import make_engine, upgrade
from services.store.bulk_build import merge_postgresql, merge_sqlite

table = read_model_generations


@dataclass(frozen=True)
class Generation:
    """One set of read-model tables."""

    number: int
    state: str  # building, active, retired, dropped
    location: str  # where its tables are: the home database, a SQLite file, or a PostgreSQL schema
    created_at: datetime
    switched_at: datetime | None


class GenerationError(RuntimeError):
    """A generation cannot be built, switched to or dropped: says why."""


class Generations:
    """The generations of one home database, and an engine for each."""

    def __init__(self, home_url: str, *, wait_bound: float | None = None, session_name: str | None = None) -> None:
        self.home_url = home_url
        self._sessions = {"wait_bound": wait_bound, "session_name": session_name}  # every engine's (services/runtime/db.py)
        self.home = make_engine(home_url, create=False, **self._sessions)
        self._engines: dict[int, Engine] = {0: self.home}

    @property
    def dialect(self) -> str:
        return self.home.dialect.name

    def close(self) -> None:
        for engine in self._engines.values():
            engine.dispose()

    def active_number(self) -> int:
        """The generation the API serves and the projector keeps (a primary-key-sized read of the home database)."""
        with self.home.connect() as conn:
            found = conn.execute(select(table.c.generation).where(table.c.state == "active")).scalar()
        return 0 if found is None else found

    def active(self) -> tuple[int, Engine]:
        """The active generation's number and engine."""
        number = self.active_number()
        return number, self.engine(number)

    def list(self) -> list[Generation]:
        with self.home.connect() as conn:
            rows = conn.execute(select(table).order_by(table.c.generation)).all()
        return [Generation(r.generation, r.state, self.location(r.generation), r.created_at, r.switched_at) for r in rows]

    def location(self, number: int) -> str:
        if number == 0:
            return self.home.url.render_as_string(hide_password=True)
        if self.dialect == "sqlite":
            return str(self._sqlite_path(number))
        return f"schema {_schema(number)}"

    def engine(self, number: int) -> Engine:
        """The engine of generation ``number`` (cached)."""
        if number not in self._engines:
            if self.dialect == "sqlite":
                self._engines[number] = make_engine(f"sqlite:///{self._sqlite_path(number)}")
            else:
                self._engines[number] = make_engine(self.home_url, schema=_schema(number), **self._sessions)
        return self._engines[number]

    def create(self) -> tuple[int, Engine]:
        """A new, empty, migrated generation in state ``building``."""
        with self.home.begin() as conn:
            number = (conn.execute(select(func.max(table.c.generation))).scalar() or 0) + 1
            conn.execute(insert(table).values(generation=number, state="building", created_at=datetime.now(UTC)))
        self._clear(number, recreate=True)
        engine = self.engine(number)
        upgrade(engine)
        return number, engine

    def switch(self, number: int) -> int:
        """Make ``number`` the active generation in one transaction; returns the one it replaced."""
        with self.home.begin() as conn:
            state = conn.execute(select(table.c.state).where(table.c.generation == number).with_for_update()).scalar()
            if state not in ("building", "retired"):
                raise GenerationError(f"generation {number} is {state or 'unknown'}: only a built generation can be switched to")
            previous = self.active_number_in(conn)
            now = datetime.now(UTC)
            conn.execute(update(table).where(table.c.state == "active").values(state="retired"))
            conn.execute(update(table).where(table.c.generation == number).values(state="active", switched_at=now))
        return previous

    @staticmethod
    def active_number_in(conn) -> int:
        found = conn.execute(select(table.c.generation).where(table.c.state == "active")).scalar()
        return 0 if found is None else found

    def upgrade(self) -> list[int]:
        """Migrate the home database, then every generation that still has tables; returns their numbers."""
        upgrade(self.home)
        live = [g.number for g in self.list() if g.number != 0 and g.state != "dropped"]
        for number in live:
            upgrade(self.engine(number))
        return [0, *live]

    def place(self, number: int) -> tuple[str, str | None]:
        """Where generation ``number``'s tables are: (url, schema)."""
        if self.dialect == "sqlite":
            return f"sqlite:///{self._sqlite_path(number)}", None
        return self.home_url, _schema(number)

    def partition(self, number: int, part: int) -> tuple[str, str | None]:
        """A fresh, migrated place for one worker's share of a parallel rebuild of ``number``: (url, schema)."""
        if self.dialect == "sqlite":
            path = self._sqlite_path(number).with_suffix(f".p{part}{self._sqlite_path(number).suffix}")
            _remove_sqlite(path)
            url, schema = f"sqlite:///{path}", None
        else:
            url, schema = self.home_url, f"{_schema(number)}_p{part}"
            with self.home.begin() as conn:
                conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
                conn.execute(text(f'CREATE SCHEMA "{schema}"'))
        engine = make_engine(url, schema=schema)
        upgrade(engine)
        engine.dispose()
        return url, schema

    @contextlib.contextmanager
    def building(self, number: int) -> Iterator[Engine]:
        """An engine on generation ``number`` for loading it in bulk before anything reads it.

        On SQLite, a scratch engine (``make_engine``): the merged rows and the indexes built over them
        are written once, not to the write-ahead log first and then into the file, which was half of
        a large rebuild's merge. The generation's own engine puts the file back in write-ahead-log mode
        when it next connects. On PostgreSQL, the generation's own engine.
        """
        if self.dialect != "sqlite":
            yield self.engine(number)
            return
        self.engine(number).dispose()  # leaving write-ahead-log mode needs the only connection to the file
        engine = make_engine(f"sqlite:///{self._sqlite_path(number)}", scratch=True)
        try:
            yield engine
        finally:
            engine.dispose()

    def merge_partitions(self, number: int, places: list[tuple[str, str | None]], target: Engine | None = None) -> None:
        """Copy every worker's rows into generation ``number`` (in the database itself, no round trips),
        then remove the workers' places. Checkpoints are not copied: the caller sets them.

        Every column a place's table has is copied, those migrations add beside the metadata's (a
        PostgreSQL page's search vector) included: the worker computed them, the merge keeps them.
        """
        tables = [t.name for t in metadata.sorted_tables if t.name not in CONTROL_TABLES and t.name != "projection_checkpoints"]
        target = target or self.engine(number)
        if self.dialect == "sqlite":
            merge_sqlite(target, [make_url(url).database or "" for url, _ in places], tables)
            for url, _ in places:
                _remove_sqlite(Path(make_url(url).database or ""))
            return
        with target.begin() as conn:
            for _, schema in places:
                merge_postgresql(conn, schema, tables)
        with self.home.begin() as conn:
            for _, schema in places:
                conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))

    def abandon(self, number: int) -> None:
        """Drop a generation that was being built and will not be switched to."""
        self._drop(number)

    def drop_retired(self) -> list[int]:
        """Drop the tables of every retired generation (and abandoned builds); returns their numbers."""
        dropped = []
        for generation in self.list():
            if generation.state in ("retired", "building"):
                self._drop(generation.number)
                dropped.append(generation.number)
        return dropped

    def _drop(self, number: int) -> None:
        with self.home.begin() as conn:
            state = conn.execute(select(table.c.state).where(table.c.generation == number)).scalar()
            if state == "active":
                raise GenerationError(f"generation {number} is the active one: switch to another before dropping it")
        if number == 0:
            # The home database's own tables: emptied (the schema stays, migrated, for Alembic).
            with self.home.begin() as conn:
                for read_model in reversed(metadata.sorted_tables):
                    if read_model.name not in CONTROL_TABLES:
                        conn.execute(delete(read_model))
        else:
            engine = self._engines.pop(number, None)
            if engine is not None:
                engine.dispose()
            self._clear(number, recreate=False)
        with self.home.begin() as conn:
            conn.execute(update(table).where(table.c.generation == number).values(state="dropped"))

    def _clear(self, number: int, *, recreate: bool) -> None:
        """Remove generation ``number``'s tables (and whatever an interrupted build left); ``recreate`` its schema."""
        if self.dialect == "sqlite":
            path = self._sqlite_path(number)
            _remove_sqlite(path)
            for leftover in path.parent.glob(f"{path.stem}.p*{path.suffix}"):  # an interrupted parallel build's
                _remove_sqlite(leftover)
            return
        with self.home.begin() as conn:
            pattern = _schema(number) + r"\_p%"  # an interrupted parallel build's schemas
            for leftover in conn.execute(text("SELECT nspname FROM pg_namespace WHERE nspname LIKE :p"), {"p": pattern}).scalars():
                conn.execute(text(f'DROP SCHEMA IF EXISTS "{leftover}" CASCADE'))
            conn.execute(text(f'DROP SCHEMA IF EXISTS "{_schema(number)}" CASCADE'))
            if recreate:
                conn.execute(text(f'CREATE SCHEMA "{_schema(number)}"'))

    def _sqlite_path(self, number: int) -> Path:
        home = Path(make_url(self.home_url).database or "")
        return home.with_name(f"{home.stem}.g{number}{home.suffix}")


def _remove_sqlite(path: Path) -> None:
    for leftover in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        with contextlib.suppress(FileNotFoundError):
            leftover.unlink()


def _schema(number: int) -> str:
    return f"claimlog_g{number}"
