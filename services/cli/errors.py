"""What the ``claimlog`` command says when it stops on an error a user can act on: one message saying what
went wrong and what to do (``services.cli.main`` prints it, exit code 2). Anything else is a bug, and keeps
its traceback."""

from __future__ import annotations

import re

import typer
from pydantic import ValidationError
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from services.identity.actors import ActorsUnavailable, NoLiveToken
from services.log import LogError
from services.runtime.db import DatabaseNotReadyError
from services.runtime.embedded import EmbeddedNatsError
from services.runtime.settings import Settings
from services.store.generations import GenerationError
from services.timeline.as_of import is_claim_id

SLUG = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
# Errors whose message already says what happened and what to do.
EXPLAINED = (LogError, DatabaseNotReadyError, EmbeddedNatsError, GenerationError, ActorsUnavailable, NoLiveToken)


def explain(error: BaseException, settings: Settings | None) -> str | None:
    """The message for ``error`` if a user can act on it, given the settings the command ran with; None for a bug."""
    if isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        return explain(error.exceptions[0], settings)
    if isinstance(error, EXPLAINED):
        return str(error)
    if isinstance(error, ValidationError) and error.title == Settings.__name__:
        return settings_problems(error)
    if isinstance(error, DBAPIError):
        return _database_problem(error, settings)
    return None


def _database_problem(error: DBAPIError, settings: Settings | None) -> str | None:
    if settings is None:  # no command read its settings, so none opened a database: not a user's error
        return None
    try:
        url = make_url(settings.resolved_database_url())
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


def claim_key(claim: str) -> str:
    """A claim named on the command line: an id or a slug, or a usage error saying how claims are named."""
    if not is_claim_id(claim) and not SLUG.fullmatch(claim):
        raise typer.BadParameter(no_claim(claim), param_hint="CLAIM")
    return claim


def no_claim(claim: str, point: object | None = None) -> str:
    """Why a claim named on the command line was not found, and what to type instead."""
    if not is_claim_id(claim) and not SLUG.fullmatch(claim):
        return (f"no claim {claim!r}: name a claim by its id (CLM- and 4 to 12 digits, e.g. CLM-0338) or its slug "
                "(lowercase words joined by hyphens)")
    if point is not None:
        return (f"no claim {claim!r} as of {point}: it was drafted after that point, or never; "
                f"`claimlog history {claim}` shows when it was drafted")
    return (f"no claim {claim!r} in this registry: check the id or slug; the listing names every claim "
            "(GET /claims, or /pages/claims in a browser)")


def settings_problems(error: ValidationError) -> str:
    """Settings from the environment that do not read: each variable, what it holds, why, and its default."""
    problems = []
    for problem in error.errors(include_url=False):
        name = str(problem["loc"][0]) if problem["loc"] else ""
        why = problem["msg"].removeprefix("Value error, ")
        field = Settings.model_fields.get(name)
        if field is None:  # a rule over several settings: its message names them
            problems.append(why)
            continue
        default = field.get_default(call_default_factory=True)
        unset = f"; unset it for the default ({default})" if default not in (None, "", [], ()) else "; or unset it"
        problems.append(f"CLAIMLOG_{name.upper()}={problem['input']!r}: {why}{unset}")
    return "the settings in the environment do not read: " + "; ".join(problems)


def validation_problems(error: ValidationError) -> str:
    """A pydantic error as a person reads it: each value that is wrong, what was given, and why."""
    problems = []
    for problem in error.errors(include_url=False):
        where = ".".join(map(str, problem["loc"])) or "value"
        given = problem.get("input")
        shown = f" (given {given!r})" if isinstance(given, str | int | float) else ""
        problems.append(f"{where}: {problem['msg'].removeprefix('Value error, ')}{shown}")
    return "; ".join(problems)
