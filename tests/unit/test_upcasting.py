"""Upcasting on read: which stored version an event is, and what happens when an upcaster cannot read it."""

from __future__ import annotations

import json
from typing import Annotated, Union

import pytest
from pydantic import Field, TypeAdapter, ValidationError

from events import Actor, ActorKind, UnknownEventError, decode, encode, registry
from events.disagreement import DisagreementFiled
from events.imported import PageDrafter
from projections.base import Record
from projections.claim_page import fold
from tests.builders import (
    BOT,
    MODEL,
    PERSON,
    answered,
    attached,
    drafted,
    filed,
    related,
    resolved,
    review_withdrawn,
    reviewed,
)


def _v2(monkeypatch: pytest.MonkeyPatch, upcaster=None) -> None:
    """DisagreementFiled at version 2, with the given upcaster from 1 (or none); events made with schema_version=1."""
    monkeypatch.setitem(registry.CURRENT_VERSION, "DisagreementFiled", 2)
    if upcaster is not None:
        monkeypatch.setitem(registry.UPCASTERS, ("DisagreementFiled", 1), upcaster)
    else:
        monkeypatch.delitem(registry.UPCASTERS, ("DisagreementFiled", 1))


def test_the_version_the_code_writes_is_each_event_class_default():
    versions = {"SourceAttached": 3, "ClaimsRelated": 2}  # 2: imported_from; 3 (sources): written_by
    versions |= {"ClaimDrafted": 2}  # 2: imported_from, drafted_by
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
        assert (upcast.schema_version, upcast.imported_from) == (registry.CURRENT_VERSION[event.type], "a registry page")
    brought = decode(version_1(attached("CLM-0001", actor=BOT)))
    assert (brought.schema_version, brought.imported_from, brought.written_by) == (3, None, None)


def test_a_version_2_source_imported_from_a_page_reads_as_one_whose_page_named_no_one():
    stored = json.loads(encode(attached("CLM-0001", actor=BOT, imported_from="CLM-0001.txt")))
    stored["schema_version"] = 2
    upcast = decode(json.dumps(stored).encode())
    assert (upcast.schema_version, upcast.imported_from, upcast.written_by) == (3, "CLM-0001.txt", None)


# A draft as a version 1 page import stored it, byte for byte: the invented registry-drafter's.
STORED_V1_IMPORTED_DRAFT = (
    b'{"event_id":"019a4000-0000-7000-8000-000000000001","type":"ClaimDrafted","claim_id":"CLM-0338",'
    b'"occurred_at":"2026-11-01T12:00:00Z","actor":{"id":"registry-drafter","kind":"model",'
    b'"model":"unnamed registry drafting model"},"slug":"old-import","statement":"A statement.",'
    b'"capability":"Planning","observed_on":"One benchmark","drafted_confidence":"low"}'
)


def test_a_version_1_draft_imported_as_the_registry_drafter_is_the_importers_of_a_model_draft_from_a_page():
    upcast = decode(STORED_V1_IMPORTED_DRAFT)
    assert (upcast.schema_version, upcast.actor) == (2, Actor(id="claimlog-ingest", kind="service"))
    assert (upcast.imported_from, upcast.drafted_by) == ("a registry page", PageDrafter(kind="model"))
    assert upcast.drafter_kind is ActorKind.MODEL  # what keeps it out of the scorecard until reviewed
    assert (upcast.slug, upcast.drafted_confidence, upcast.occurred_at.isoformat()) == (
        "old-import", "low", "2026-11-01T12:00:00+00:00")
    notes = fold([Record(1, upcast.occurred_at, upcast)]).notes
    assert (notes.drafted_by_model, notes.drafted.by.id, notes.drafted.imported_from) == (True, "claimlog-ingest", "a registry page")


def test_a_version_1_draft_by_anyone_else_reads_unchanged():
    for actor in (MODEL, PERSON, BOT):
        upcast = decode(version_1(drafted("CLM-0001", actor=actor)))
        assert (upcast.schema_version, upcast.actor, upcast.imported_from, upcast.drafted_by) == (2, actor, None, None)
        assert upcast.drafter_kind is actor.kind


def test_a_draft_says_who_a_page_says_drafted_it_only_with_the_page():
    unpaged = drafted("CLM-0001", actor=PERSON, drafted_by=PageDrafter(kind="model"))
    assert (unpaged.page_drafter, unpaged.drafter_kind) == (None, ActorKind.PERSON)
    page = fold([Record(1, unpaged.occurred_at, unpaged)])
    assert (page.notes.drafted_by, page.status.unreviewed_model_draft) == (None, False)
    with pytest.raises(ValidationError, match="only a model drafter names a model"):
        PageDrafter(kind="person", model="m-1")


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
