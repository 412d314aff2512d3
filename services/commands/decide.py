"""``decide(command, state, ctx) -> events``: pure, one rule per command, a ``Rejected`` when it does not apply.

Every event ``decide`` returns is validated by its event class (``event_of``). ``ruling`` is the rules
alone: a bulk ingest applies them and assembles its events itself (``services/ingest/bulk_events.py``).

The rules, in words (docs/commands.md lists them with their reasons):

- a claim is drafted once; every other command needs a drafted claim; a slug belongs to the first
  claim that took it;
- a retracted or superseded claim is closed: it can no longer be revised, retracted, superseded,
  reviewed, related, or take new sources and disagreements; what is already on it can still be
  withdrawn, answered, resolved or unrelated;
- sources, disagreements and reviews are named by the producer and named once; acting on one
  needs it to exist; a withdrawn source or review cannot be corrected or withdrawn again; a
  resolved disagreement cannot be answered or resolved again;
- a review is of a revision that exists, by a person or by an AI model (never a service), never by
  the claim's drafter nor by a model of the drafting model's name, and its kind follows from the
  authenticated actor;
- a claim superseded by, or related to, another claim by id needs that claim to exist.

Every rule a claim's own events can judge is the contract's (``events/rules.py``), applied here to the
command and by the log's gate (services/admission/) to every stored event, however it was written: one
copy. Here remain the rules that look further (a slug, another claim) and the fields a rule decides.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from functools import cache

from pydantic import ValidationError

from events import Actor, Event
from events.log_entry import MAX_EVENT_BYTES
from events.registry import encode
from events.rules import breach, reviewer_kind
from services.commands.claim_state import ClaimState
from services.commands.models import Command


class Kind(StrEnum):
    """What sort of refusal a rejection is; each edge says it in its own terms (HTTP: a status)."""

    NOT_FOUND = "not_found"  # the claim, or something on it the command names, does not exist
    CONFLICT = "conflict"  # it exists, but its state (or another writer) rules the command out
    FORBIDDEN = "forbidden"  # the actor may not do this
    INVALID = "invalid"  # the command cannot be carried out as written


class Rejected(Exception):
    """A command that does not apply: its kind, a machine-readable reason and a sentence."""

    def __init__(self, kind: Kind, reason: str, message: str) -> None:
        super().__init__(message)
        self.kind, self.reason, self.message = kind, reason, message


@dataclass(slots=True, kw_only=True)
class Context:
    """What a decision needs besides the command and the state: who, when, which id, what else exists.

    Built by keyword only, so no caller depends on the order of its fields. Nothing changes one once it
    is made; it is not declared frozen because a frozen dataclass sets each field through
    ``object.__setattr__`` as it is made, several times the cost, and a bulk ingest makes one a line."""

    actor: Actor
    event_id: str
    now: datetime
    correlation_id: str | None = None
    existing_claims: frozenset[str] = frozenset()  # other claims this command refers to that exist
    prev_hash: str | None = None  # the claim's last stored hash, so the event is built chained
    slug_owner: str | None = None  # a draft's slug: the claim it belongs to (None: not known to be taken)


def decide(command: Command, state: ClaimState, ctx: Context) -> list[Event]:
    """The events that carry out ``command`` on a claim in ``state``, validated, or ``Rejected``."""
    event = event_of(command, ctx, ruling(command, state, ctx))
    _refuse_oversized(event, command)
    return [event]


def ruling(command: Command, state: ClaimState, ctx: Context) -> dict[str, object]:
    """``Rejected`` when ``command`` does not apply to a claim in ``state``; else the event fields the rules
    decide beyond the command's facts (a review's kind), often none. The rules the claim's own events can
    judge are the contract's (events/rules.py), which the log's gate applies to every stored event too."""
    name = command.command
    broken = breach(state, _type_of(type(command)), command, ctx.actor, what=name)
    if broken is not None:
        raise Rejected(Kind(broken.kind), broken.reason, broken.message)
    return RULES.get(name, _no_rule)(command, state, ctx)


@cache
def _type_of(command_class: type[Command]) -> str:
    """The ``type`` of the event a command class asks for (looked up once: a bulk ingest asks at every line)."""
    return command_class.event_type().model_fields["type"].default


def _refuse_oversized(event: Event, command: Command) -> None:
    """An event whose stored bytes would not fit one transparency-log entry is refused here, by size in bytes.

    A character is at most 6 bytes of JSON (a ``\\uXXXX`` escape), so only events with much text are encoded to measure.
    """
    text = sum(len(v) for v in event.__dict__.values() if isinstance(v, str))
    if text * 6 + 4_096 <= MAX_EVENT_BYTES:
        return
    size = len(encode(event))
    if size > MAX_EVENT_BYTES:
        raise too_large(command, size)


def too_large(command: Command, size: int) -> Rejected:
    """The refusal of a command whose event is ``size`` bytes, over ``MAX_EVENT_BYTES`` (a bulk ingest, which
    assembles and encodes its events itself, refuses its line with it)."""
    return Rejected(
        Kind.INVALID,
        "event_too_large",
        f"{command.command} on {command.claim_id}: its event would be {size:,} bytes of JSON, over the "
        f"{MAX_EVENT_BYTES:,} an event may hold; shorten its text fields",
    )


def _no_rule(command: Command, state: ClaimState, ctx: Context) -> dict:
    return {}


def _draft(command, state: ClaimState, ctx: Context) -> dict:
    if ctx.slug_owner is not None and ctx.slug_owner != command.claim_id:
        raise Rejected(Kind.CONFLICT, "slug_taken", f"slug {command.slug!r} belongs to {ctx.slug_owner}: choose another")
    return {}


def _supersede(command, state: ClaimState, ctx: Context) -> dict:
    _require_claim(command.superseded_by, ctx)  # itself: refused by the contract's rules
    return {}


def _review(command, state: ClaimState, ctx: Context) -> dict:
    return {"reviewer_kind": reviewer_kind(ctx.actor)}


def _relate(command, state: ClaimState, ctx: Context) -> dict:
    if command.related_claim_id == command.claim_id:
        raise Rejected(Kind.INVALID, "related_to_itself", f"{command.claim_id} cannot be related to itself")
    if command.related_claim_id is not None:
        _require_claim(command.related_claim_id, ctx)
    return {}


def _require_claim(claim_id: str, ctx: Context) -> None:
    if claim_id not in ctx.existing_claims:
        raise Rejected(Kind.NOT_FOUND, "claim_not_found", f"no claim {claim_id}")


# The rules that need more than the claim's own events (other claims, the slugs), and the fields decided.
RULES = {
    "draft_claim": _draft,
    "supersede_claim": _supersede,
    "record_review": _review,
    "relate_claims": _relate,
}


REFERENCES = {"supersede_claim": "superseded_by", "relate_claims": "related_claim_id"}


def referenced_claims(command: Command) -> set[str]:
    """Other claims a command refers to by id, which must exist for it to apply."""
    field = REFERENCES.get(command.command)
    other = getattr(command, field) if field else None
    return {other} if other and other != command.claim_id else set()


def event_of(command: Command, ctx: Context, decided: dict[str, object]) -> Event:
    """The command's event: its facts, the envelope from ``ctx`` and the ``decided`` fields, validated as
    one by the event class; an event-level rule it breaks (a revision that changes nothing) is ``Rejected``."""
    fields = command.facts()  # a fresh dict: the envelope and the decided fields join it
    fields.update(
        event_id=ctx.event_id, occurred_at=ctx.now, actor=ctx.actor, correlation_id=ctx.correlation_id, prev_hash=ctx.prev_hash, **decided
    )
    try:
        return command.event_type().model_validate(fields)
    except ValidationError as error:
        problems = "; ".join(e["msg"].removeprefix("Value error, ") for e in error.errors())
        raise Rejected(Kind.INVALID, "invalid_command", f"{command.command} on {command.claim_id}: {problems}") from None
