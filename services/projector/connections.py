"""The database side of a lapsed lease: the connections a worker that stopped answering left open.

A worker paused inside a transaction (SIGSTOP, a long GC pause, a frozen VM) keeps its row locks, and
the worker that takes its partitions folds the same events, so its batch waits on those rows. The
server's ``idle_in_transaction_session_timeout`` (``services/runtime/db.py``) ends such a session,
but only once the server is waiting for a statement: after a pipelined ``executemany`` (psycopg's)
it is not armed until the next one, which a paused worker never sends. So every worker's connections
carry its name and its registry's stream (``application_name``), and a worker that took partitions ends the connections of
workers no longer live: their leases lapsed with their liveness, and their commits would be refused.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import Engine, text

PREFIX = "claimlog-worker:"
NAME_BYTES = 63  # PostgreSQL keeps this much of an application_name

END_STALE = text(
    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
    " AND left(application_name, :length) = :prefix AND NOT (application_name = ANY(:live))"
)


def session_name(worker: str, stream: str) -> str:
    """The ``application_name`` of the database connections of ``worker`` of the registry on ``stream``."""
    return f"{_prefix(stream)}{worker}".encode()[:NAME_BYTES].decode(errors="ignore")


def end_stale_connections(engine: Engine, live: Iterable[str], *, stream: str) -> int:
    """End the connections of the registry's workers not among ``live`` (PostgreSQL; elsewhere nothing): how many."""
    if engine.dialect.name != "postgresql":
        return 0
    prefix = _prefix(stream)
    with engine.connect() as conn:
        names = [session_name(w, stream) for w in live]
        ended = conn.execute(END_STALE, {"length": len(prefix), "prefix": prefix, "live": names}).scalar_one()
        conn.commit()
    return ended


def _prefix(stream: str) -> str:
    return f"{PREFIX}{stream}:"  # another registry's workers (another stream's leases) are never ended
