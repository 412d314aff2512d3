"""Database engines and migrations: SQLite by default, PostgreSQL by URL; Alembic is the only way the schema changes."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, ExceptionContext, create_engine, event
from sqlalchemy.exc import OperationalError

import migrations

MIGRATIONS_DIR = Path(migrations.__file__).parent
IDLE_IN_TRANSACTION_ENDED = "25P03"  # PostgreSQL's idle_in_transaction_session_timeout, as it ends a session
SORT_THREADS = min(os.cpu_count() or 1, 4)  # SQLite's helper threads for a scratch file's sorts


class DatabaseNotReadyError(RuntimeError):
    """The database schema is not at the version this code needs."""


def make_engine(
    url: str, *, schema: str | None = None, scratch: bool = False, create: bool = True, wait_bound: float | None = None,
    session_name: str | None = None,
) -> Engine:
    """An engine for the read models, tuned for its dialect; on PostgreSQL, in ``schema`` when given
    (every statement, migrations included, then resolves names there first).

    ``scratch`` (SQLite): for a file nothing reads while it is built, and which is thrown away if the
    build fails (a rebuild's): the rollback journal in memory and no syncing, so rows are written once,
    not to the write-ahead log and then again into the file. An engine without ``scratch`` puts the
    file back in write-ahead-log mode when it connects.

    ``create=False`` (SQLite): connecting to a file that does not exist is a ``DatabaseNotReadyError``
    instead of an empty file made on the way (only ``upgrade`` makes the read-model database).

    ``wait_bound`` (PostgreSQL): no session waits for a lock, nor stays idle inside a transaction,
    longer than this many seconds (``lock_timeout``, ``idle_in_transaction_session_timeout``). A
    projector worker's is below its lease (``session_bound``): a worker paused inside a transaction
    loses its session, and its row locks, before another worker can take its partitions.
    ``session_name`` (PostgreSQL): the connections' ``application_name`` (a worker's: services/projector/connections.py)."""
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url.removeprefix("postgresql://")
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
        event.listen(engine, "connect", _scratch_pragmas if scratch else _sqlite_pragmas)
        path = engine.url.database
        if not create and path and path != ":memory:":
            event.listen(engine, "do_connect", lambda *_: _require_file(Path(path), engine))
        return engine
    options = [f"-csearch_path={schema}"] if schema else []
    if wait_bound is not None:
        bound = max(1, round(wait_bound * 1000))  # milliseconds; 0 would turn the timeouts off
        options += [f"-clock_timeout={bound}", f"-cidle_in_transaction_session_timeout={bound}"]
    connect_args: dict[str, str] = {"options": " ".join(options)} if options else {}
    if session_name is not None:
        connect_args["application_name"] = session_name
    engine = create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=10, connect_args=connect_args)
    if wait_bound is not None:
        event.listen(engine, "handle_error", _session_ended)
    return engine


def _session_ended(context: ExceptionContext) -> OperationalError | None:
    """A session ended by the server for idling in its transaction is gone like one cut off by a
    restart: an ``OperationalError`` (retried), not the ``InternalError`` psycopg raises for it."""
    if getattr(context.original_exception, "sqlstate", None) != IDLE_IN_TRANSACTION_ENDED:
        return None
    context.is_disconnect = True  # the pool drops the connection
    return OperationalError(context.statement, context.parameters, context.original_exception, connection_invalidated=True)


def session_bound(lease_seconds: float) -> float:
    """How long a projector worker's database session may wait or idle in a transaction: a quarter of
    the lease. Paused after its last renewal (at most a third of the lease and a look before the
    pause), its session ends before the lease lapses, so no other worker ever waits on its rows."""
    return lease_seconds / 4


def _require_file(path: Path, engine: Engine) -> None:
    if not path.exists():
        raise DatabaseNotReadyError(
            f"there is no read-model database at {engine.url.render_as_string(hide_password=True)} yet: "
            "run `claimlog db upgrade`, or `claimlog up`, which creates it"
        )


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")  # readers never block the projector's writes
    cursor.execute("PRAGMA synchronous=NORMAL")  # read models are rebuilt from the log, not the last word
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def _scratch_pragmas(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=MEMORY")  # rollbacks (a savepoint's) still work; a crash loses the file
    cursor.execute("PRAGMA synchronous=OFF")
    # Building an index over a whole table sorts its keys, with helper threads when allowed: a rebuilt
    # generation is indexed sooner with two than with none. (A larger page cache for the sort made it
    # slower; docs/architecture.md.)
    cursor.execute(f"PRAGMA threads={SORT_THREADS}")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def alembic_config(engine: Engine) -> Config:
    """Alembic's configuration, pointed at claimlog's migrations and this engine."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["engine"] = engine
    return config


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Migrate the read-model schema to ``revision``."""
    path = engine.url.database
    if engine.dialect.name == "sqlite" and path and path != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        sqlite3.connect(path).close()  # here, and only here, a missing read-model database is made
    require_known_revision(engine)
    command.upgrade(alembic_config(engine), revision)


def require_known_revision(engine: Engine) -> None:
    """Refuse a database whose schema revision none of this code's migrations names: a newer claimlog wrote it,
    and no migration here can go on from it (nor should this code read it)."""
    script = ScriptDirectory.from_config(alembic_config(engine))
    with engine.connect() as conn:
        current = MigrationContext.configure(conn).get_current_revision()
    if current is None or current in {known.revision for known in script.walk_revisions()}:
        return
    raise DatabaseNotReadyError(
        f"the read-model database at {engine.url.render_as_string(hide_password=True)} is at schema revision {current}, "
        f"which this claimlog does not know (its newest is {script.get_current_head()}): a newer claimlog wrote it. "
        "Nothing was changed. Run that newer claimlog on it, or point CLAIMLOG_DATABASE_URL at a new database "
        "(the read models are rebuilt from the log)"
    )


def require_current(engine: Engine) -> None:
    """Refuse to run on a database whose schema is not at the newest migration."""
    head = ScriptDirectory.from_config(alembic_config(engine)).get_current_head()
    with engine.connect() as conn:
        current = MigrationContext.configure(conn).get_current_revision()
    if current != head:
        raise DatabaseNotReadyError(
            f"the database at {engine.url.render_as_string(hide_password=True)} is at schema revision "
            f"{current or 'none'}, this code needs {head}: run `claimlog db upgrade`"
        )
