"""A command that does not validate, said in the user's words: what is wrong, where, and what to do.

pydantic's own messages name its machinery ("Input tag 'x' found using 'command' does not match any of the
expected tags", "JSON decode error", "Value error, ..."); the HTTP API and ``claimlog ingest`` of JSON Lines
both say a problem through ``problem_text``, so a command refused on one path reads as it does on the other.
"""

from __future__ import annotations

from typing import Any

from services.commands.models import COMMAND_TYPES

COMMAND_NAMES = ", ".join(COMMAND_TYPES)
RULEBOOK = "docs/commands.md"


def unknown_command(name: object) -> str:
    """Why a command name is refused, and the names there are."""
    return f"there is no command {name!r}: the commands are {COMMAND_NAMES} (each one's fields: {RULEBOOK})"


def where(problem: dict[str, Any], root: str) -> str:
    """Where a problem is: the field's path under ``root`` (``body``, ``line``), the command's name for an unknown
    one, the character of the text where it stops reading as JSON."""
    loc = [str(part) for part in problem.get("loc", ())]
    if problem.get("type") in ("union_tag_invalid", "union_tag_not_found"):
        return ".".join([*loc, "command"]) if loc and loc[0] == root else f"{root}.command"
    if problem.get("type") == "json_invalid" and loc and loc[-1].isdigit():
        return f"{'.'.join(loc[:-1]) or root} at character {loc[-1]}"
    return ".".join(loc) or root


def problem_text(problem: dict[str, Any]) -> str:
    """One pydantic problem of a command as a sentence: what is wrong and what to do (the caller says where)."""
    kind, context = problem.get("type"), problem.get("ctx") or {}
    if kind == "union_tag_invalid":
        return unknown_command(context.get("tag"))
    if kind == "union_tag_not_found":
        return f"no 'command' field: name the command, one of {COMMAND_NAMES}"
    if kind == "json_invalid":
        why = context.get("error") or problem["msg"]
        return f"not JSON ({why}): send one JSON object, e.g. {{\"command\": \"draft_claim\", ...}}"
    if kind == "extra_forbidden":
        return f"no such field: drop it (each command's fields: {RULEBOOK})"
    return str(problem["msg"]).removeprefix("Value error, ")
