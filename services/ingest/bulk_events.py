"""A bulk ingest's events, assembled from what was validated already instead of validated a second time.

``decide`` validates every event it makes (``services/commands/decide.py``). A bulk ingest decides each
line with the same rules (``ruling``) and then assembles the line's event here, which gives the event
validation would give whenever validating could not change it:

- its facts are the command's, validated under the very fields the event declares
  (``services/commands/models.py`` builds each command from its event's fields, numbers stricter);
- the event class has no validator of its own (over one field, or over all of them together), which
  only validation would run;
- the ingest vouches for the envelope (``vouched``): its event ids are derived to the envelope's
  pattern (``bulk_lines``) or validated with their command, its hashes are ``event_hash``'s, no
  correlation id, and its clock reading and actor passed ``sound_time_and_actor`` once a batch.

Anything else is validated (``event_of``). Validating every event twice was the largest single cost of a
line (docs/decisions/0100-bulk-line-assembly.md). The event is made as pydantic's ``model_construct``
makes one (every field's default, then the fields given, in the class's order), without the per-field
loop that makes ``model_construct`` cost more than validating. ``tests/unit/test_bulk_events.py`` holds
the assembled event equal, byte for byte, to the validated one for generated commands, and
``tests/unit/test_pydantic_internals.py`` fails when the pydantic internals this relies on change.
"""

from __future__ import annotations

from datetime import UTC, datetime

from events import EVENT_TYPES, Actor, Event
from services.commands.decide import Context, event_of
from services.commands.models import COMMAND_TYPES, Command


def has_own_validators(cls: type[Event]) -> bool:
    """Whether the event class validates beyond its fields' types: a validator over one field or over the whole model."""
    decorators = cls.__pydantic_decorators__
    return bool(decorators.model_validators or decorators.field_validators)


def sound_time_and_actor(now: datetime, actor: Actor) -> bool:
    """Whether a clock reading and an actor are ones the envelope's validation takes as they are."""
    return type(now) is datetime and now.tzinfo is UTC and type(actor) is Actor


def assembled(command: Command, ctx: Context, decided: dict[str, object], *, vouched: bool) -> Event:
    """The event ``event_of(command, ctx, decided)`` validates, assembled without validating it again when
    that cannot change it (``vouched``: the caller checked the envelope, as the module says)."""
    cls = command.event_type()
    template = _TEMPLATES.get(cls)
    if template is None or not vouched:
        return event_of(command, ctx, decided)
    values = template.copy()
    values.update(command.__dict__)  # the facts, and two fields that are not the event's: one goes, one is replaced
    del values["command"]
    values.update(event_id=ctx.event_id, occurred_at=ctx.now, actor=ctx.actor, correlation_id=ctx.correlation_id, prev_hash=ctx.prev_hash)
    given = _GIVEN[type(command)]
    if decided:
        values.update(decided)
        given = given | decided.keys()
    event = _new(cls)  # BaseModel has no __new__ of its own: object's, as model_construct makes one
    _set(event, "__dict__", values)
    _set(event, "__pydantic_fields_set__", set(given))
    _set(event, "__pydantic_extra__", None)  # events forbid extra fields
    _set(event, "__pydantic_private__", None)  # and have no private attributes
    return event


# Per event class without validators of its own, every field's default, in the class's order.
_TEMPLATES: dict[type[Event], dict[str, object]] = {
    cls: {name: info.get_default(call_default_factory=True) for name, info in cls.model_fields.items()}
    for cls in EVENT_TYPES.values()
    if not has_own_validators(cls)
}
# Per command class, the fields its event is given: the command's facts and the envelope.
_GIVEN: dict[type[Command], frozenset[str]] = {
    model: frozenset(model.model_fields) - {"command"} | {"occurred_at", "actor", "correlation_id", "prev_hash"}
    for model in COMMAND_TYPES.values()
}
_set = object.__setattr__  # as pydantic sets them: past a frozen model's own __setattr__
_new = object.__new__
