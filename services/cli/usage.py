"""Arguments that do not read, said in the user's words.

Typer converts options through pydantic, and passes on pydantic's first message as it is ("Value error,
'robot' is not one of ...", "Input should be a valid integer, unable to parse string as an integer"). The
``claimlog`` group rewrites such a message before it is shown: what was given, what it should be, and what
to type; the option it belongs to is named by click ("Invalid value for '--as-of-seq'").
"""

from __future__ import annotations

from typing import Any

import typer
from pydantic import ValidationError
from typer.core import TyperGroup

WHOLE_NUMBER = {"int_parsing", "int_type", "int_from_float", "int_parsing_size"}
NUMBER = {"float_parsing", "float_type", "decimal_parsing"}
BOUNDS = {"greater_than_equal": "ge", "greater_than": "gt", "less_than_equal": "le", "less_than": "lt"}
BOUND_WORDS = {"ge": "{} or more", "gt": "more than {}", "le": "{} or less", "lt": "less than {}"}


def plain_problem(error: ValidationError) -> str:
    """The first problem of a converted argument: what was given, why it does not do, and what to give."""
    problem = error.errors(include_url=False)[0]
    kind, given, context = problem["type"], problem.get("input"), problem.get("ctx") or {}
    if kind in WHOLE_NUMBER:
        return f"{given!r} is not a whole number: write it in digits, e.g. 27"
    if kind in NUMBER:
        return f"{given!r} is not a number: write it in digits, e.g. 2.5"
    if kind in BOUNDS:
        bound = BOUND_WORDS[BOUNDS[kind]].format(context.get(BOUNDS[kind]))
        return f"{given} is out of range: give {bound}"
    if kind == "bool_parsing":
        return f"{given!r} is not yes or no: give true or false"
    message = str(problem["msg"]).removeprefix("Value error, ")
    return _with_choice(message, given)


def _with_choice(message: str, given: Any) -> str:
    """A message naming the allowed values ("is not one of ..."), told to pick one of them."""
    if "is not one of" in message:
        return f"{message.rstrip('.')}: give one of them"
    return message


class ClaimlogGroup(TyperGroup):
    """The ``claimlog`` command's group: a subcommand's argument refused by pydantic is said plainly."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except typer.BadParameter as error:
            if isinstance(error.__cause__, ValidationError):
                error.message = plain_problem(error.__cause__)
            raise
