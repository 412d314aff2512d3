"""The envelope every event carries: who did what to which claim, when, and why."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated

import uuid_utils
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, model_validator

CLAIM_ID_PATTERN = r"^CLM-[0-9]{4,12}$"
ClaimId = Annotated[str, StringConstraints(pattern=CLAIM_ID_PATTERN)]
# Ids a producer chooses (sources, disagreements, reviews): safe in URLs and subjects.
LOCAL_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"
LocalId = Annotated[str, StringConstraints(pattern=LOCAL_ID_PATTERN)]
# Characters free text never keeps: C0 controls but tab and line breaks (NUL among them), DEL, and the bidi
# marks, embeddings, overrides and isolates (U+202E makes "txt.exe" read as "exe.txt"; the marks U+200E,
# U+200F and U+061C reorder text as well). They are removed wherever text is read, from a command or from
# the log, so no page, listing or terminal ever shows them. The line and paragraph separators U+2028 and
# U+2029 end a JavaScript string in older engines and a line in some terminals: they become line feeds.
_UNSHOWN: dict[int, str | None] = dict.fromkeys([*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F, 0x061C,
                                                 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)])
_UNSHOWN |= {0x2028: "\n", 0x2029: "\n"}


def _neutralised(value: str) -> str:
    if value.isprintable() and value.isascii():
        return value
    shown = value.translate(_UNSHOWN).strip()
    if not shown:
        raise ValueError("holds nothing but control characters")
    return shown


# A character free text keeps and shows: not a space (nor U+0085, which stripping removes) and not one of the
# characters above. Free text needs one; the pattern says so to generated clients, in the JSON Schemas only,
# because the validator's own message ("holds nothing but control characters") says more than a regex.
VISIBLE_PATTERN = r"[^\s\x00-\x1f\x7f\x85\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
_SHOWS_SOMETHING = Field(json_schema_extra={"pattern": VISIBLE_PATTERN})
# Free text: stripped, at least one character a reader can see, the characters above removed.
Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=20_000),
                 AfterValidator(_neutralised), _SHOWS_SOMETHING]
ShortText = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=500),
                      AfterValidator(_neutralised), _SHOWS_SOMETHING]
# An actor's id, as pages show it: letters, digits and . _ @ + - (no spaces, controls or bidi characters).
ActorId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$")]


def _aware_utc(value: datetime) -> datetime:
    if value.tzinfo is None:
        raise ValueError("occurred_at needs a time zone (use UTC, e.g. 2026-11-30T12:00:00Z)")
    try:
        return value.astimezone(UTC)
    except OverflowError:  # 9999-12-31T23:59:59-14:00 is past the last time UTC can hold
        raise ValueError(f"{value.isoformat()} is outside the range of times in UTC (years 1 to 9999)") from None


UtcDateTime = Annotated[datetime, AfterValidator(_aware_utc)]
# An event id: a UUID in lower-case hex. A previous event's hash: SHA-256 in lower-case hex.
EVENT_ID_PATTERN = r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
HASH_PATTERN = r"^[0-9a-f]{64}$"
MAX_ID_LENGTH = 64  # a causation or correlation id


def new_event_id() -> str:
    """A fresh time-ordered event id (UUIDv7)."""
    return str(uuid_utils.uuid7())


def utc_now() -> datetime:
    """The current time in UTC, the only clock events use."""
    return datetime.now(UTC)


class ActorKind(StrEnum):
    PERSON = "person"
    MODEL = "model"
    SERVICE = "service"


class Actor(BaseModel):
    """Who acted: a person, a model (with its name) or a service."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: ActorId
    kind: ActorKind
    model: ShortText | None = Field(default=None, description="The model's name and version, when a model acted.")

    @model_validator(mode="after")
    def _model_named_when_a_model_acted(self) -> Actor:
        if self.kind is ActorKind.MODEL and not self.model:
            raise ValueError("an actor of kind 'model' must name its model")
        if self.kind is not ActorKind.MODEL and self.model:
            raise ValueError(f"only a model actor names a model, not a {self.kind.value}")
        return self


def actor_label(actor_id: str, kind: str, model: str | None = None) -> str:
    """An actor as every page names it (HTML, the terminal): its id, then its kind, and a model's name."""
    return f"{actor_id} ({kind}{': ' + model if model else ''})"


class Event(BaseModel):
    """Base of every event: the envelope. Subclasses add the facts and a literal ``type``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    event_id: Annotated[str, StringConstraints(pattern=EVENT_ID_PATTERN)]
    type: str
    schema_version: int = Field(default=1, ge=1)
    claim_id: ClaimId
    occurred_at: UtcDateTime
    actor: Actor
    causation_id: str | None = Field(default=None, max_length=MAX_ID_LENGTH, description="The event or command that caused this one.")
    correlation_id: str | None = Field(default=None, max_length=MAX_ID_LENGTH, description="Groups the events of one operation.")
    prev_hash: str | None = Field(
        default=None,
        pattern=HASH_PATTERN,
        description="SHA-256 of the stored bytes of the claim's previous event; None for its first event.",
    )
