"""The write side: commands decided against a claim's state folded from the log, then appended.

``models`` (commands and their JSON shapes), ``claim_state`` (what decisions look at), ``decide`` (the pure
rules, and the validated events they make), ``service`` (read, decide, append, retry), ``slugs`` (who owns a
slug). The HTTP routes are in ``services/http/``, bulk JSON Lines in ``services/ingest/``.
"""

from services.commands.claim_state import ClaimState, claim_state
from services.commands.decide import Context, Kind, Rejected, decide
from services.commands.models import COMMAND_TYPES, AnyCommand, Command, parse_command
from services.commands.service import CommandService, Outcome

__all__ = [
    "COMMAND_TYPES",
    "AnyCommand",
    "ClaimState",
    "Command",
    "CommandService",
    "Context",
    "Kind",
    "Outcome",
    "Rejected",
    "claim_state",
    "decide",
    "parse_command",
]
