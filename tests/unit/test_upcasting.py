"""Upcasting on read: which stored version an event is, and what happens when an upcaster cannot read it."""

from __future__ import annotations

import json
from typing import Annotated, Union

import pytest
from pydantic import Field, TypeAdapter

from events import UnknownEventError, decode, encode, registry
from events.source import SourceAttached
from tests.builders import attached


def _v2(monkeypatch: pytest.MonkeyPatch, upcaster=None) -> None:
    monkeypatch.setitem(registry.CURRENT_VERSION, "SourceAttached", 2)
    if upcaster is not None:
        monkeypatch.setitem(registry.UPCASTERS, ("SourceAttached", 1), upcaster)


def test_the_version_the_code_writes_is_each_event_class_default():
    for name, cls in registry.EVENT_TYPES.items():
        assert registry.CURRENT_VERSION[name] == cls.model_fields["schema_version"].default == 1, name


class SourceAttachedV2(SourceAttached):
    """A version 2 whose class writes 2 by default."""

    schema_version: int = Field(default=2, ge=1)


def test_an_event_stored_without_a_schema_version_is_version_1_and_is_upcast(monkeypatch):
    _v2(monkeypatch, lambda raw: {**raw, "measured": raw["measured"].upper()})
    monkeypatch.setitem(registry.EVENT_TYPES, "SourceAttached", SourceAttachedV2)
    classes = tuple(registry.EVENT_TYPES.values())
    monkeypatch.setattr(registry, "_ADAPTER", TypeAdapter(Annotated[Union[classes], Field(discriminator="type")]))  # noqa: UP007
    stored = json.loads(encode(attached("CLM-0001", measured="accuracy")))
    del stored["schema_version"]
    upcast = decode(json.dumps(stored).encode())
    assert upcast.measured == "ACCURACY" and upcast.schema_version == 2


def test_a_missing_upcaster_makes_the_event_unreadable_with_why(monkeypatch):
    _v2(monkeypatch)
    with pytest.raises(UnknownEventError, match="SourceAttached schema_version 1: no upcaster to version 2"):
        decode(encode(attached("CLM-0001")))


def test_an_upcaster_that_fails_makes_the_event_unreadable_with_why(monkeypatch):
    _v2(monkeypatch, lambda raw: {**raw, "measured": raw["no such field"]})
    with pytest.raises(UnknownEventError, match="could not be upcast: KeyError"):
        decode(encode(attached("CLM-0001")))


def test_upcasting_goes_one_version_at_a_time_and_leaves_the_stored_object_alone(monkeypatch):
    monkeypatch.setitem(registry.CURRENT_VERSION, "SourceAttached", 3)
    seen = []
    monkeypatch.setitem(registry.UPCASTERS, ("SourceAttached", 1), lambda raw: seen.append(1) or {**raw, "measured": "a"})
    monkeypatch.setitem(registry.UPCASTERS, ("SourceAttached", 2), lambda raw: seen.append(raw["schema_version"]) or {**raw, "measured": raw["measured"] + "b"})
    stored = encode(attached("CLM-0001", measured="x"))
    event = decode(stored)
    assert (event.measured, event.schema_version, seen) == ("ab", 3, [1, 2])
    assert json.loads(stored)["measured"] == "x"
