"""The write side: commands decided against a claim's state folded from the log, then appended.

``models`` (commands and their JSON shapes), ``state`` (what decisions look at), ``decide`` (the pure
rules), ``service`` (read, decide, append, retry), ``http`` (the routes), ``bulk`` (JSON Lines).
"""

from services.commands.decide import Context, Kind, Rejected, decide
from services.commands.models import COMMAND_TYPES, AnyCommand, Command, parse_command
from services.commands.service import CommandService, Outcome
from services.commands.state import ClaimState, claim_state

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
