"""``decide(command, state, ctx) -> events``: pure, one rule per command, a ``Rejected`` when it does not apply.

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
  the claim's drafter nor by a model of the drafting model's name (``projections/scorecard.py``:
  the fold holds the same rule), and its kind follows from the authenticated actor;
- a claim superseded by, or related to, another claim by id needs that claim to exist.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from enum import StrEnum
from typing import NamedTuple

from pydantic import ValidationError

from events import EVENT_TYPES, Actor, ActorKind, Event
from events.envelope import EVENT_ID_PATTERN, HASH_PATTERN, MAX_ID_LENGTH
from projections.scorecard import review_refusal
from services.commands.models import COMMAND_TYPES, Command
from services.commands.state import ClaimState

CLOSED_FOR = frozenset(
    {"revise_claim", "retract_claim", "supersede_claim", "attach_source", "file_disagreement", "record_review", "relate_claims"}
)


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


class Context(NamedTuple):
    """What a decision needs besides the command and the state: who, when, which id, what else exists."""

    actor: Actor
    event_id: str
    now: datetime
    correlation_id: str | None = None
    existing_claims: frozenset[str] = frozenset()  # other claims this command refers to that exist
    prev_hash: str | None = None  # the claim's last stored hash, so the event is built chained
    slug_owner: str | None = None  # a draft's slug: the claim it belongs to (None: not known to be taken)
    # The caller vouches that the envelope passes ``_sound_envelope``: a bulk ingest, whose event ids it
    # derived or were validated with their command, whose hashes are ``event_hash``'s, and whose clock
    # reading and actor it checked with ``sound_time_and_actor`` once a batch.
    sound: bool = False


def decide(command: Command, state: ClaimState, ctx: Context) -> list[Event]:
    """The events that carry out ``command`` on a claim in ``state``, or ``Rejected``."""
    name = command.command
    claim = command.claim_id
    if name == "draft_claim":
        if state.drafted:
            raise Rejected(Kind.CONFLICT, "claim_exists", f"{claim} is already drafted; revise it instead")
    elif not state.drafted:
        raise Rejected(Kind.NOT_FOUND, "claim_not_found", f"no claim {claim}: draft it first")
    elif name in CLOSED_FOR and state.lifecycle != "active":
        raise Rejected(Kind.CONFLICT, f"claim_{state.lifecycle}", f"{claim} is {state.lifecycle}: it cannot take {name}")
    extra = RULES.get(name, _no_rule)(command, state, ctx)
    return [_event(command, ctx, **extra)]


def _no_rule(command: Command, state: ClaimState, ctx: Context) -> dict:
    return {}


def _draft(command, state: ClaimState, ctx: Context) -> dict:
    if ctx.slug_owner is not None and ctx.slug_owner != command.claim_id:
        raise Rejected(Kind.CONFLICT, "slug_taken", f"slug {command.slug!r} belongs to {ctx.slug_owner}: choose another")
    return {}


def _supersede(command, state: ClaimState, ctx: Context) -> dict:
    successor = command.superseded_by
    if successor == command.claim_id:
        raise Rejected(Kind.INVALID, "superseded_by_itself", f"{command.claim_id} cannot supersede itself")
    _require_claim(successor, ctx)
    return {}


def _new_item(command, items: dict[str, str], kind: str) -> None:
    """A source, disagreement or review id is used once per claim."""
    key = getattr(command, f"{kind}_id")
    if key in items:
        raise Rejected(Kind.CONFLICT, f"{kind}_exists", f"{command.claim_id} already has a {kind} {key!r}")


def _open_item(command, items: dict[str, str], kind: str, closed: str) -> None:
    """Acting on a source, disagreement or review needs it to exist and not to be ``closed`` already."""
    key = getattr(command, f"{kind}_id")
    found = items.get(key)
    if found is None:
        raise Rejected(Kind.NOT_FOUND, f"{kind}_not_found", f"{command.claim_id} has no {kind} {key!r}")
    if found == closed:
        raise Rejected(Kind.CONFLICT, f"{kind}_{closed}", f"{kind} {key!r} of {command.claim_id} is already {closed}")


def _attach(command, state: ClaimState, ctx: Context) -> dict:
    _new_item(command, state.sources, "source")
    return {}


def _act_on_source(command, state: ClaimState, ctx: Context) -> dict:
    _open_item(command, state.sources, "source", "withdrawn")
    return {}


def _file(command, state: ClaimState, ctx: Context) -> dict:
    _new_item(command, state.disagreements, "disagreement")
    if command.source_id is not None and command.source_id not in state.sources:
        raise Rejected(Kind.NOT_FOUND, "source_not_found", f"{command.claim_id} has no source {command.source_id!r} to disagree with")
    return {}


def _act_on_disagreement(command, state: ClaimState, ctx: Context) -> dict:
    _open_item(command, state.disagreements, "disagreement", "resolved")
    return {}


def _review(command, state: ClaimState, ctx: Context) -> dict:
    refusal = review_refusal(state.drafted_by, ctx.actor) if state.drafted_by is not None else None
    if refusal is not None:
        raise Rejected(Kind.FORBIDDEN, *refusal)
    _new_item(command, state.reviews, "review")
    if command.revision > state.revision:
        raise Rejected(
            Kind.INVALID, "revision_not_found", f"{command.claim_id} is at revision {state.revision}; revision {command.revision} does not exist"
        )
    return {"reviewer_kind": "person" if ctx.actor.kind is ActorKind.PERSON else "ai"}


def _withdraw_review(command, state: ClaimState, ctx: Context) -> dict:
    _open_item(command, state.reviews, "review", "withdrawn")
    return {}


def _relate(command, state: ClaimState, ctx: Context) -> dict:
    if command.related_claim_id == command.claim_id:
        raise Rejected(Kind.INVALID, "related_to_itself", f"{command.claim_id} cannot be related to itself")
    if command.related_claim_id is not None:
        _require_claim(command.related_claim_id, ctx)
    return {}


def _unrelate(command, state: ClaimState, ctx: Context) -> dict:
    if command.related_key not in state.related:
        raise Rejected(Kind.NOT_FOUND, "relation_not_found", f"{command.claim_id} is not related to {command.related_key}")
    return {}


def _require_claim(claim_id: str, ctx: Context) -> None:
    if claim_id not in ctx.existing_claims:
        raise Rejected(Kind.NOT_FOUND, "claim_not_found", f"no claim {claim_id}")


RULES = {
    "draft_claim": _draft,
    "supersede_claim": _supersede,
    "attach_source": _attach,
    "correct_source": _act_on_source,
    "withdraw_source": _act_on_source,
    "file_disagreement": _file,
    "answer_disagreement": _act_on_disagreement,
    "resolve_disagreement": _act_on_disagreement,
    "record_review": _review,
    "withdraw_review": _withdraw_review,
    "relate_claims": _relate,
    "unrelate_claims": _unrelate,
}


REFERENCES = {"supersede_claim": "superseded_by", "relate_claims": "related_claim_id"}


def referenced_claims(command: Command) -> set[str]:
    """Other claims a command refers to by id, which must exist for it to apply."""
    field = REFERENCES.get(command.command)
    other = getattr(command, field) if field else None
    return {other} if other and other != command.claim_id else set()


def _event(command: Command, ctx: Context, **decided) -> Event:
    cls = command.event_type()
    template = _ASSEMBLED.get(cls)
    if template is not None and (ctx.sound or _sound_envelope(ctx)):
        return _assembled(cls, template, command, ctx, decided)
    fields = command.facts()  # a fresh dict: the envelope and the decided fields join it, validated as one
    fields.update(
        event_id=ctx.event_id, occurred_at=ctx.now, actor=ctx.actor, correlation_id=ctx.correlation_id, prev_hash=ctx.prev_hash, **decided
    )
    try:
        return cls.model_validate(fields)
    except ValidationError as error:  # an event-level rule, e.g. a revision that changes nothing
        problems = "; ".join(e["msg"].removeprefix("Value error, ") for e in error.errors())
        raise Rejected(Kind.INVALID, "invalid_command", f"{command.command} on {command.claim_id}: {problems}") from None


# An event is assembled from what was validated already, not validated a second time, when that cannot
# change it: its facts are the command's, validated under the very fields the event declares
# (``services/commands/models.py`` builds each command from its event's fields, numbers stricter), the
# envelope is checked below, and the event class has no validator of its own (over one field, or over
# all of them together), which only validation would run. Validating it again, field by field, was the
# largest single cost of deciding a bulk ingest's line (bench/bulk.py); tests/unit/test_assembled_events.py
# holds the assembled event equal, and byte for byte the same, to the validated one for every command.
_ASSEMBLED: dict[type[Event], dict[str, object]] = {
    cls: {name: info.get_default(call_default_factory=True) for name, info in cls.model_fields.items()}
    for cls in EVENT_TYPES.values()
    if not (cls.__pydantic_decorators__.model_validators or cls.__pydantic_decorators__.field_validators)
}
_EVENT_ID, _HASH = re.compile(EVENT_ID_PATTERN), re.compile(HASH_PATTERN)  # used with fullmatch: no newline after


def _sound_envelope(ctx: Context) -> bool:
    """What the event's own validation would check of the envelope, checked here (anything else is left to it)."""
    return (
        type(ctx.event_id) is str and _EVENT_ID.fullmatch(ctx.event_id) is not None
        and sound_time_and_actor(ctx.now, ctx.actor)
        and (ctx.correlation_id is None or (type(ctx.correlation_id) is str and len(ctx.correlation_id) <= MAX_ID_LENGTH))
        and (ctx.prev_hash is None or (type(ctx.prev_hash) is str and _HASH.fullmatch(ctx.prev_hash) is not None))
    )


def sound_time_and_actor(now: datetime, actor: Actor) -> bool:
    """What ``_sound_envelope`` checks of the time and the actor."""
    return type(now) is datetime and now.tzinfo is UTC and type(actor) is Actor


def _assembled(cls: type[Event], template: dict[str, object], command: Command, ctx: Context, decided: dict) -> Event:
    """The event ``model_validate`` makes of the command's facts, the envelope and the ``decided`` fields,
    made as ``model_construct`` makes one (every field's default, then the fields given, in the class's
    order), without the per-field loop that makes ``model_construct`` cost more than validating."""
    values = template.copy()
    values.update(command.__dict__)  # the facts, and two fields that are not the event's: one goes, one is replaced
    del values["command"]
    values["event_id"], values["occurred_at"], values["actor"], values["correlation_id"], values["prev_hash"] = (
        ctx.event_id, ctx.now, ctx.actor, ctx.correlation_id, ctx.prev_hash
    )
    given = set(_GIVEN[type(command)])
    if decided:
        values.update(decided)
        given.update(decided)
    event = _new(cls)  # BaseModel has no __new__ of its own: object's, without looking it up
    _set(event, "__dict__", values)
    _set(event, "__pydantic_fields_set__", given)
    _set(event, "__pydantic_extra__", None)
    _set(event, "__pydantic_private__", None)
    return event


# Per command class, the fields its event is given: the command's facts and the envelope.
_GIVEN: dict[type[Command], frozenset[str]] = {
    model: frozenset(model.model_fields) - {"command"} | {"occurred_at", "actor", "correlation_id", "prev_hash"}
    for model in COMMAND_TYPES.values()
}
_set = object.__setattr__  # as pydantic sets them: past a frozen model's own __setattr__
_new = object.__new__
