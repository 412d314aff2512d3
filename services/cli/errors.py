"""What the ``claimlog`` command says when it stops on an error a user can act on: one message saying what
went wrong and what to do (``services.cli.main`` prints it, exit code 2). Anything else is a bug, and keeps
its traceback."""

from __future__ import annotations

from pydantic import ValidationError
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from services.actors import ActorsUnavailable
from services.log import LogError
from services.rebuild.generations import GenerationError
from services.runtime.db import DatabaseNotReadyError
from services.runtime.embedded import EmbeddedNatsError
from services.runtime.settings import Settings

# Errors whose message already says what happened and what to do.
EXPLAINED = (LogError, DatabaseNotReadyError, EmbeddedNatsError, GenerationError, ActorsUnavailable)


def explain(error: BaseException) -> str | None:
    """The message for ``error`` if a user can act on it; None for a bug."""
    if isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        return explain(error.exceptions[0])
    if isinstance(error, EXPLAINED):
        return str(error)
    if isinstance(error, DBAPIError):
        return _database_problem(error)
    return None


def _database_problem(error: DBAPIError) -> str | None:
    try:
        url = make_url(Settings().resolved_database_url())
    except Exception:  # noqa: BLE001 - settings that do not read: their own error is the one to show
        return None
    where = url.render_as_string(hide_password=True)
    reason = str(error.orig).strip().splitlines()[0] if error.orig is not None else type(error).__name__
    if error.statement is None or error.connection_invalidated:  # the connection itself failed
        return f"could not open the read-model database at {where}: {reason} (CLAIMLOG_DATABASE_URL)"
    if type(error.orig).__name__ == "UndefinedTable" or reason.startswith("no such table"):  # PostgreSQL, SQLite
        return (
            f"the read-model database at {where} has no claimlog tables ({reason}): "
            "run `claimlog db upgrade`, or `claimlog up`, which migrates it"
        )
    return None


def validation_problems(error: ValidationError) -> str:
    """A pydantic error as a person reads it: each value that is wrong, what was given, and why."""
    problems = []
    for problem in error.errors(include_url=False):
        where = ".".join(map(str, problem["loc"])) or "value"
        given = problem.get("input")
        shown = f" (given {given!r})" if isinstance(given, str | int | float) else ""
        problems.append(f"{where}: {problem['msg'].removeprefix('Value error, ')}{shown}")
    return "; ".join(problems)
