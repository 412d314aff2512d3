"""Commands: what a producer asks for. One per event type, its body the event's facts without the envelope.

A command names no actor and no time: who acts comes from authentication, when from the clock of
the service that decides it. The optional ``event_id`` lets a producer that keeps its own ids make
retries safe without an ``Idempotency-Key``.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal, Union

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    TypeAdapter,
    ValidationError,
    create_model,
    model_validator,
)

from events import EVENT_TYPES, Event
from events.envelope import EVENT_ID_PATTERN, ClaimId

# The envelope, which the command service fills in; a command body never carries it.
ENVELOPE = frozenset(Event.model_fields) - {"claim_id"}
EVENT_ID = Annotated[
    str,
    Field(
        pattern=EVENT_ID_PATTERN,
        description="The producer's own id for the event; a retry with the same id publishes once.",
    ),
]

# Who a registry page says wrote a disagreement or review, and which page: only a page import, which
# appends its events itself, says so; a command is its authenticated actor's own word.
FROM_A_PAGE = frozenset({"imported_from", "written_by"})
# Likewise who a page says drafted a claim (``claimlog ingest``): a draft_claim command is its actor's own draft.
DRAFTED_ON_A_PAGE = frozenset({"imported_from", "drafted_by"})
# command name -> (event type it produces, event fields the service decides rather than the body)
COMMANDS: dict[str, tuple[str, frozenset[str]]] = {
    "draft_claim": ("ClaimDrafted", DRAFTED_ON_A_PAGE),
    "revise_claim": ("ClaimRevised", frozenset()),
    "retract_claim": ("ClaimRetracted", frozenset()),
    "supersede_claim": ("ClaimSuperseded", frozenset()),
    "attach_source": ("SourceAttached", frozenset({"written_by"})),
    "correct_source": ("SourceCorrected", frozenset()),
    "withdraw_source": ("SourceWithdrawn", frozenset()),
    "file_disagreement": ("DisagreementFiled", FROM_A_PAGE),
    "answer_disagreement": ("DisagreementAnswered", FROM_A_PAGE),
    "resolve_disagreement": ("DisagreementResolved", FROM_A_PAGE),
    # A review's kind follows from who is authenticated: a person, or a model ("ai").
    "record_review": ("ReviewRecorded", frozenset({"reviewer_kind"}) | FROM_A_PAGE),
    "withdraw_review": ("ReviewWithdrawn", FROM_A_PAGE),
    "relate_claims": ("ClaimsRelated", frozenset()),
    "unrelate_claims": ("ClaimsUnrelated", frozenset()),
}


# Commands that must say at least one of these fields (their JSON Schemas say so too, as ``anyOf``).
AT_LEAST_ONE: dict[str, tuple[str, ...]] = {
    "revise_claim": ("statement", "capability", "observed_on", "technique", "falsifier"),
    "correct_source": ("relation", "citation", "measured", "breadth"),
    "relate_claims": ("related_claim_id", "statement"),
}


class DuplicateKeyError(ValueError):
    """A JSON object that names a key twice: which key, and where the object is (a JSON path, ``$`` the body)."""

    def __init__(self, key: str, path: str):
        super().__init__(f"the JSON object at {path} names {key!r} more than once; give each field once")
        self.key, self.path = key, path


class _Members(list):
    """A JSON object's members in the order written, duplicates kept (json's ``object_pairs_hook``)."""


def refuse_duplicate_keys(data: bytes | str) -> None:
    """Raise DuplicateKeyError if any object in the JSON names a key twice (JSON parsers keep the last one,
    silently). Text that is not JSON passes: the validator that follows says what is wrong with it."""
    if b'"' not in (data if isinstance(data, bytes) else data.encode()):
        return
    try:
        # Each object checked at C speed, in one pass, by a decoder made once: ``json.loads`` with a hook
        # builds a new decoder at every call, and on bytes guesses their encoding first, which together
        # cost more than the parse of a bulk ingest's line.
        _UNIQUE.decode(data.decode() if isinstance(data, bytes) else data)
        return
    except _NamedTwice:
        pass
    except (ValueError, RecursionError):
        # Not UTF-8 JSON as it stands: ``json.loads`` decides (it also reads bytes that start with a byte
        # order mark, and UTF-16 and UTF-32). What the decoder above reads, ``json.loads`` reads alike.
        try:
            json.loads(data, object_pairs_hook=_unique_or_raise)
            return
        except _NamedTwice:
            pass
        except (ValueError, RecursionError):
            return  # not JSON, or nested past what Python parses: the validator says so
    _check_unique(json.loads(data, object_pairs_hook=_Members), "$")  # again, to say which key and where


class _NamedTwice(Exception):
    """Some object names a key twice (``_check_unique`` then finds which)."""


def _unique_or_raise(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    members = dict(pairs)
    if len(members) != len(pairs):
        raise _NamedTwice
    return members


_UNIQUE = json.JSONDecoder(object_pairs_hook=_unique_or_raise)


def _check_unique(value: Any, path: str) -> None:
    if isinstance(value, _Members):
        seen: set[str] = set()
        for key, member in value:
            if key in seen:
                raise DuplicateKeyError(key, path)
            seen.add(key)
            _check_unique(member, f"{path}.{key}" if key.isidentifier() else f"{path}[{json.dumps(key)}]")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_unique(item, f"{path}[{index}]")


def _says_something(fields: tuple[str, ...]):
    def check(command: Command) -> Command:
        if all(getattr(command, name) is None for name in fields):
            raise ValueError(f"give at least one of: {', '.join(fields)}")
        return command

    return model_validator(mode="after")(check)


class Command(BaseModel):
    """Base of every command: the claim it acts on and, optionally, the producer's event id."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    command: str
    claim_id: ClaimId
    event_id: EVENT_ID | None = None

    @classmethod
    def event_type(cls) -> type[Event]:
        """The event class this command produces when it is accepted."""
        return _EVENT_CLASS[cls]

    def facts(self) -> dict[str, Any]:
        """The event fields this command carries (everything but ``command`` and ``event_id``)."""
        facts = self.__dict__.copy()  # every field's value, in order (a model keeps nothing else there)
        del facts["command"], facts["event_id"]
        return facts


def _command_model(name: str, event_type: str, decided: frozenset[str]) -> type[Command]:
    event_cls = EVENT_TYPES[event_type]
    fields: dict[str, Any] = {"command": (Literal[name], name)}  # type: ignore[valid-type]
    for field_name, info in event_cls.model_fields.items():
        if field_name in ENVELOPE or field_name in decided or field_name == "claim_id":
            continue
        fields[field_name] = (_strict(info.annotation), info)
    model_name = "".join(part.title() for part in name.split("_"))
    doc = f"Ask for a {event_type} event. {event_cls.__doc__ or ''}".strip()
    validators = {}
    if name in AT_LEAST_ONE:
        validators["_says_something"] = _says_something(AT_LEAST_ONE[name])
        # Present and not null: a null field counts as not given.
        required = [{"required": [field], "properties": {field: {"not": {"type": "null"}}}} for field in AT_LEAST_ONE[name]]
        fields["model_config"] = ConfigDict(frozen=True, extra="forbid", json_schema_extra={"anyOf": required})
    config = fields.pop("model_config", None)
    model = create_model(model_name, __base__=Command, __doc__=doc, __module__=__name__,
                         __validators__=validators, **fields)
    if config is not None:
        model.model_config.update(config)
        model.model_rebuild(force=True)
    return model


def _strict(annotation: Any) -> Any:
    """Numbers and booleans taken as JSON gives them: no "1" or true for 1, no 1 or "yes" for true. A number
    with a zero fraction (``1.0``) is the integer 1, as JSON Schema's ``integer`` says, so a body the
    published schemas allow is never refused for how a client's encoder wrote a whole number."""
    if annotation in (int, int | None):
        return Annotated[annotation, Strict(), BeforeValidator(_whole_number)]
    if annotation in (bool, bool | None):
        return Annotated[annotation, Strict()]
    return annotation


def _whole_number(value: Any) -> Any:
    """``1.0`` as 1; anything else as it came (the strict check refuses what is not an integer)."""
    return int(value) if type(value) is float and value.is_integer() else value


COMMAND_TYPES: dict[str, type[Command]] = {
    name: _command_model(name, event_type, decided) for name, (event_type, decided) in COMMANDS.items()
}
# Per command class, looked up once (a bulk ingest asks at every line): the event class it produces.
_EVENT_CLASS: dict[type[Command], type[Event]] = {
    model: EVENT_TYPES[COMMANDS[name][0]] for name, model in COMMAND_TYPES.items()
}
# ``command`` is optional on a command's own route, and names the command here: the union requires it.
AnyCommand = Annotated[
    Union[tuple(COMMAND_TYPES.values())],  # noqa: UP007
    Field(discriminator="command", json_schema_extra={"required": ["command"]}),
]
COMMAND_ADAPTER: TypeAdapter[Command] = TypeAdapter(AnyCommand)


def parse_command(data: bytes | str | dict[str, Any]) -> Command:
    """A command from JSON (or a dict), validated; raises pydantic's ValidationError with every problem."""
    if isinstance(data, dict):
        return COMMAND_ADAPTER.validate_python(data)
    try:
        command = _VALIDATOR.validate_json(data)
    except ValidationError:
        refuse_duplicate_keys(data)  # a key given twice is said first, whatever else is wrong
        raise
    if not _each_key_once(data, command):
        refuse_duplicate_keys(data)
    return command


def _each_key_once(data: bytes | str, command: Command) -> bool:
    """True when the text shows at a glance that no key is given twice; False when it takes a parse to tell.

    Validated, every key of the text is one of the command's fields given (``extra="forbid"``), so the
    text names ``len(model_fields_set)`` different keys. With no backslash every quote opens or closes
    a string, and with no space between a closing quote and a colon every key shows as ``"name":``;
    counting those counts each key once (and a string value starting with a colon once more, which
    only sends the text to the full check). A single ``{`` means no nested object whose keys could
    repeat. Anything else is parsed again by ``refuse_duplicate_keys``: a bulk ingest's typical line
    takes the glance, at a fraction of a parse's cost.
    """
    return (
        type(data) is bytes and b"\\" not in data and data.find(b"{", data.find(b"{") + 1) == -1 and _SPACED_COLON.search(data) is None
        and data.count(b'":') == len(command.__pydantic_fields_set__)
    )


# The union's validator, called directly: ``TypeAdapter.validate_json`` only checks its options and calls it.
_VALIDATOR = COMMAND_ADAPTER.validator
_SPACED_COLON = re.compile(rb'"[ \t\r\n]+:')


def command_schemas() -> dict[str, dict[str, Any]]:
    """One JSON Schema per command, plus ``AnyCommand`` (a line of a JSON Lines file, or ``POST /commands``)."""
    schemas = {}
    for name, model in COMMAND_TYPES.items():
        schema = model.model_json_schema()
        schema["required"] = ["command", *schema.get("required", [])]  # optional on its own route only
        schemas[name] = schema
    union = COMMAND_ADAPTER.json_schema()
    union["description"] = "Any claimlog command: the body of POST /commands, or one line of a JSON Lines file."
    schemas["AnyCommand"] = union
    return schemas
