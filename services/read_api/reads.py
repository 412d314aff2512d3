"""How a route runs one read-model query: inline on SQLite, in a worker thread on PostgreSQL.

SQLite answers in the process: a claim page is a fraction of a millisecond of CPU, less than a hop
to the thread pool, so it runs on the event loop. PostgreSQL answers over a socket: a query run on
the loop holds every other request for its round trips (under load, claim pages queue behind each
other), so it runs in a worker thread, where the wait releases the GIL. A single-statement read
needs no transaction: on PostgreSQL it runs in autocommit, which saves the BEGIN and the ROLLBACK
round trips around it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ParamSpec, TypeVar

from sqlalchemy import Connection, Engine
from starlette.concurrency import run_in_threadpool

P = ParamSpec("P")
T = TypeVar("T")


async def read(db: Engine, query: Callable[..., T], *args: object) -> T:
    """``query(conn, *args)`` on a connection of ``db``, where it costs the event loop least."""
    if db.dialect.name == "sqlite":
        with db.connect() as conn:
            return query(conn, *args)
    return await run_in_threadpool(_autocommit_read, db, query, *args)


def _autocommit_read(db: Engine, query: Callable[..., T], *args: object) -> T:
    conn: Connection
    with db.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        return query(conn, *args)
