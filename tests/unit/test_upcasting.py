"""Upcasting on read: which stored version an event is, and what happens when an upcaster cannot read it."""

from __future__ import annotations

import json
from typing import Annotated, Union

import pytest
from pydantic import Field, TypeAdapter

from events import Actor, UnknownEventError, decode, encode, registry
from events.disagreement import DisagreementFiled
from tests.builders import BOT, answered, attached, filed, related, resolved, review_withdrawn, reviewed


def _v2(monkeypatch: pytest.MonkeyPatch, upcaster=None) -> None:
    """DisagreementFiled at version 2, with the given upcaster from 1 (or none); events made with schema_version=1."""
    monkeypatch.setitem(registry.CURRENT_VERSION, "DisagreementFiled", 2)
    if upcaster is not None:
        monkeypatch.setitem(registry.UPCASTERS, ("DisagreementFiled", 1), upcaster)
    else:
        monkeypatch.delitem(registry.UPCASTERS, ("DisagreementFiled", 1))


def test_the_version_the_code_writes_is_each_event_class_default():
    versions = {"SourceAttached": 2, "ClaimsRelated": 2}  # 2: imported_from
    versions |= dict.fromkeys(  # 2: imported_from, written_by
        ("DisagreementFiled", "DisagreementAnswered", "DisagreementResolved", "ReviewRecorded", "ReviewWithdrawn"), 2)
    for name, cls in registry.EVENT_TYPES.items():
        assert registry.CURRENT_VERSION[name] == cls.model_fields["schema_version"].default == versions.get(name, 1), name


def version_1(event) -> bytes:
    stored = json.loads(encode(event))
    del stored["schema_version"]
    return json.dumps(stored).encode()


def test_a_version_1_source_or_relation_imported_as_the_registry_drafter_says_it_came_from_a_page():
    drafter = registry.REGISTRY_DRAFTER
    for event in (attached("CLM-0001", actor=Actor(**drafter)), related("CLM-0001", actor=Actor(**drafter))):
        upcast = decode(version_1(event))
        assert (upcast.schema_version, upcast.imported_from) == (2, "a registry page"), type(event).__name__
    brought = decode(version_1(attached("CLM-0001", actor=BOT)))
    assert (brought.schema_version, brought.imported_from) == (2, None)


class DisagreementFiledV2(DisagreementFiled):
    """A version 2 whose class writes 2 by default."""

    schema_version: int = Field(default=2, ge=1)


def test_an_event_stored_without_a_schema_version_is_version_1_and_is_upcast(monkeypatch):
    _v2(monkeypatch, lambda raw: {**raw, "argument": raw["argument"].upper()})
    monkeypatch.setitem(registry.EVENT_TYPES, "DisagreementFiled", DisagreementFiledV2)
    classes = tuple(registry.EVENT_TYPES.values())
    monkeypatch.setattr(registry, "_ADAPTER", TypeAdapter(Annotated[Union[classes], Field(discriminator="type")]))  # noqa: UP007
    stored = json.loads(encode(filed("CLM-0001", argument="accuracy")))
    del stored["schema_version"]
    upcast = decode(json.dumps(stored).encode())
    assert upcast.argument == "ACCURACY" and upcast.schema_version == 2


def test_a_missing_upcaster_makes_the_event_unreadable_with_why(monkeypatch):
    _v2(monkeypatch)
    with pytest.raises(UnknownEventError, match="DisagreementFiled schema_version 1: no upcaster to version 2"):
        decode(encode(filed("CLM-0001", schema_version=1)))


def test_an_upcaster_that_fails_makes_the_event_unreadable_with_why(monkeypatch):
    _v2(monkeypatch, lambda raw: {**raw, "argument": raw["no such field"]})
    with pytest.raises(UnknownEventError, match="could not be upcast: KeyError"):
        decode(encode(filed("CLM-0001", schema_version=1)))


def test_upcasting_goes_one_version_at_a_time_and_leaves_the_stored_object_alone(monkeypatch):
    monkeypatch.setitem(registry.CURRENT_VERSION, "DisagreementFiled", 3)
    seen = []
    monkeypatch.setitem(registry.UPCASTERS, ("DisagreementFiled", 1), lambda raw: seen.append(1) or {**raw, "argument": "a"})
    monkeypatch.setitem(registry.UPCASTERS, ("DisagreementFiled", 2), lambda raw: seen.append(raw["schema_version"]) or {**raw, "argument": raw["argument"] + "b"})
    stored = encode(filed("CLM-0001", argument="x", schema_version=1))
    event = decode(stored)
    assert (event.argument, event.schema_version, seen) == ("ab", 3, [1, 2])
    assert json.loads(stored)["argument"] == "x"


def test_a_version_1_disagreement_or_review_was_not_imported_and_reads_as_version_2_with_no_page():
    for event in (filed("CLM-0001"), answered("CLM-0001"), resolved("CLM-0001"), reviewed("CLM-0001"),
                  review_withdrawn("CLM-0001")):
        upcast = decode(version_1(event))
        assert (upcast.schema_version, upcast.imported_from, upcast.written_by) == (2, None, None), type(event).__name__
        assert upcast.model_dump(exclude={"schema_version"}) == event.model_dump(exclude={"schema_version"})
