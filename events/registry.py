"""The one map from event type to class: decoding, encoding and upcasting go through here."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any, Union

from pydantic import Field, TypeAdapter, ValidationError

from events.claim import ClaimDrafted, ClaimRetracted, ClaimRevised, ClaimSuperseded
from events.disagreement import DisagreementAnswered, DisagreementFiled, DisagreementResolved
from events.envelope import Event
from events.imported import PAGE_IMPORTER
from events.relation import ClaimsRelated, ClaimsUnrelated
from events.review import ReviewRecorded, ReviewWithdrawn
from events.source import SourceAttached, SourceCorrected, SourceWithdrawn

EVENT_CLASSES: tuple[type[Event], ...] = (
    ClaimDrafted,
    ClaimRevised,
    ClaimRetracted,
    ClaimSuperseded,
    SourceAttached,
    SourceCorrected,
    SourceWithdrawn,
    DisagreementFiled,
    DisagreementAnswered,
    DisagreementResolved,
    ReviewRecorded,
    ReviewWithdrawn,
    ClaimsRelated,
    ClaimsUnrelated,
)
EVENT_TYPES: dict[str, type[Event]] = {cls.model_fields["type"].default: cls for cls in EVENT_CLASSES}
AnyEvent = Annotated[Union[EVENT_CLASSES], Field(discriminator="type")]  # noqa: UP007
_ADAPTER: TypeAdapter[Event] = TypeAdapter(AnyEvent)

# The schema version the code writes, per type: each class's ``schema_version`` default, so a new event
# carries it. Older stored versions are upcast on read, one version at a time; the bytes are never rewritten.
CURRENT_VERSION: dict[str, int] = {name: cls.model_fields["schema_version"].default for name, cls in EVENT_TYPES.items()}
# (type, from_version) -> function turning that version's JSON object into the next version's.
Upcaster = Callable[[dict[str, Any]], dict[str, Any]]
UPCASTERS: dict[tuple[str, int], Upcaster] = {}
# Version 1 page imports wrote their drafts, sources and relations as an invented actor, the unnamed model
# that drafts the registry's pages, though a page does not say who brought its sources: version 2 of
# sources and relations says so, in ``imported_from``.
REGISTRY_DRAFTER = {"id": "registry-drafter", "kind": "model", "model": "unnamed registry drafting model"}


def _imported_from_a_page(raw: dict[str, Any]) -> dict[str, Any]:
    if raw.get("actor") == REGISTRY_DRAFTER:
        raw["imported_from"] = "a registry page"
    return raw


UPCASTERS[("SourceAttached", 1)] = _imported_from_a_page
UPCASTERS[("ClaimsRelated", 1)] = _imported_from_a_page


# Version 1 page imports wrote their drafts as that unnamed model too, though only the page says a model
# drafted them: version 2 says so in ``drafted_by``, beside ``imported_from``, and its actor is the importer.
def _draft_imported_from_a_page(raw: dict[str, Any]) -> dict[str, Any]:
    if raw.get("actor") == REGISTRY_DRAFTER:
        raw["actor"] = PAGE_IMPORTER.model_dump(mode="json", exclude_none=True)
        raw["drafted_by"] = {"kind": "model"}
        raw["imported_from"] = "a registry page"
    return raw


UPCASTERS[("ClaimDrafted", 1)] = _draft_imported_from_a_page


# Version 2 of disagreements and reviews may say which page they were imported from and who it says wrote
# them. No version 1 event was imported (imports wrote only drafts, sources and relations): nothing to add.
def _not_imported(raw: dict[str, Any]) -> dict[str, Any]:
    return raw


for _kind in ("DisagreementFiled", "DisagreementAnswered", "DisagreementResolved", "ReviewRecorded", "ReviewWithdrawn"):
    UPCASTERS[(_kind, 1)] = _not_imported


# Version 3 of SourceAttached may say who the page it was imported from names as having brought it. The text
# format named no one before version 3: a version 2 import reads as one from a page that does not say.
def _no_one_named(raw: dict[str, Any]) -> dict[str, Any]:
    return raw


UPCASTERS[("SourceAttached", 2)] = _no_one_named


class UnknownEventError(ValueError):
    """Bytes that are not an event this code can read: says why."""


def encode(event: Event) -> bytes:
    """The canonical bytes of an event, as stored in the log: ``event.model_dump_json(exclude_none=True)``.

    Taken as bytes from the serializer that ``model_dump_json`` calls, with the same options:
    ``model_dump_json`` decodes them to text, which would only be encoded back.
    """
    return event.__pydantic_serializer__.to_json(event, exclude_none=True)


def decode(data: bytes) -> Event:
    """Bytes from the log to an event, upcasting older schema versions on the way.

    Whatever the bytes, it returns an event or raises ``UnknownEventError``: every reader of the log
    (projector, verify, history, as-of, the command service) records or skips such an event and goes on.
    """
    try:
        return _decode(data)
    except UnknownEventError:
        raise
    except Exception as error:  # noqa: BLE001 - no input may escape as anything but an unreadable event
        raise UnknownEventError(f"cannot be read: {type(error).__name__}: {error}") from None


def _decode(data: bytes) -> Event:
    try:
        event = _ADAPTER.validate_json(data)
    except ValidationError as fast_path_error:
        raw = _parse_object(data)
        upcast = _upcast(raw)
        if upcast is raw:
            raise UnknownEventError(_describe(raw, fast_path_error)) from None
        return _validate(upcast)
    version = event.schema_version
    if version == CURRENT_VERSION[event.type] and (version == 1 or "schema_version" in event.model_fields_set):
        return event  # stored at the version this code writes (1, the default, whether written or not)
    return _validate(_upcast(_parse_object(data)))


def _validate(raw: dict[str, Any]) -> Event:
    try:
        return _ADAPTER.validate_python(raw)
    except ValidationError as error:
        raise UnknownEventError(_describe(raw, error)) from None


def _parse_object(data: bytes) -> dict[str, Any]:
    try:
        raw = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UnknownEventError(f"not JSON: {error}") from None
    if not isinstance(raw, dict):
        raise UnknownEventError(f"an event is a JSON object, got {type(raw).__name__}")
    return raw


def _upcast(raw: dict[str, Any]) -> dict[str, Any]:
    kind = raw.get("type")
    version = raw.get("schema_version", 1)
    if kind not in EVENT_TYPES or not isinstance(version, int):
        return raw
    if version > CURRENT_VERSION[kind]:
        raise UnknownEventError(
            f"{kind} schema_version {version} is newer than this code reads ({CURRENT_VERSION[kind]})"
        )
    current = raw
    while version < CURRENT_VERSION[kind]:
        upcaster = UPCASTERS.get((kind, version))
        if upcaster is None:
            raise UnknownEventError(f"{kind} schema_version {version}: no upcaster to version {version + 1}")
        try:
            current = dict(upcaster(dict(current)))
        except Exception as error:  # noqa: BLE001 - an upcaster that fails makes the event unreadable, not the reader
            raise UnknownEventError(f"{kind} schema_version {version} could not be upcast: {type(error).__name__}: {error}") from None
        version += 1
        current["schema_version"] = version
    return current


def _describe(raw: dict[str, Any], error: ValidationError) -> str:
    kind = raw.get("type")
    if kind not in EVENT_TYPES:
        return f"unknown event type {kind!r}"
    problems = "; ".join(
        f"{'.'.join(str(p) for p in e['loc'][1:]) or '(event)'}: {e['msg']}" for e in error.errors()[:5]
    )
    return f"invalid {kind}: {problems}"
