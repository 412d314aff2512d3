"""The event contract: encoding, decoding, upcasting and the errors producers see."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from pydantic import ValidationError

from events import Actor, UnknownEventError, decode, encode, registry
from events.claim import ClaimDrafted
from tests.builders import drafted, filed, history, revised


def test_every_event_survives_encoding_and_decoding():
    for event in history("CLM-0001"):
        assert decode(encode(event)) == event


def test_an_events_bytes_are_its_json_without_nulls_as_pydantic_dumps_it():
    events = [*history("CLM-0001"), drafted("CLM-0002", statement="caf\u00e9 \u2014 \U0001f600", technique=None)]
    assert {event.type for event in events} >= {"ClaimDrafted", "SourceAttached", "ReviewRecorded"}
    for event in events:
        assert encode(event) == event.model_dump_json(exclude_none=True).encode()


def test_an_unknown_type_is_named_in_the_error():
    with pytest.raises(UnknownEventError, match="unknown event type 'ClaimExploded'"):
        decode(b'{"type": "ClaimExploded"}')


def test_a_bad_field_is_named_in_the_error():
    data = json.loads(encode(drafted("CLM-0001")))
    data["claim_id"] = "CLM-1;DROP"
    with pytest.raises(UnknownEventError, match="invalid ClaimDrafted: claim_id"):
        decode(json.dumps(data).encode())


def test_a_schema_version_from_the_future_is_refused():
    data = json.loads(encode(drafted("CLM-0001")))
    data["schema_version"] = 99
    with pytest.raises(UnknownEventError, match="newer than this code reads"):
        decode(json.dumps(data).encode())


def test_bytes_that_are_not_json_are_refused():
    with pytest.raises(UnknownEventError, match="not JSON"):
        decode(b"\xff\xfe not json")


def test_an_older_schema_version_is_upcast_on_read(monkeypatch):
    monkeypatch.setitem(registry.CURRENT_VERSION, "DisagreementFiled", 2)
    monkeypatch.setitem(
        registry.UPCASTERS, ("DisagreementFiled", 1), lambda raw: {**raw, "argument": raw["argument"].upper()}
    )
    stored = encode(filed("CLM-0001", argument="accuracy", schema_version=1))
    upcast = decode(stored)
    assert upcast.argument == "ACCURACY"
    assert upcast.schema_version == 2
    assert json.loads(stored)["argument"] == "accuracy"


def test_a_model_actor_must_name_its_model():
    with pytest.raises(ValidationError, match="must name its model"):
        Actor(id="drafter", kind="model")


def test_occurred_at_needs_a_time_zone():
    with pytest.raises(ValidationError, match="needs a time zone"):
        drafted("CLM-0001", occurred_at=datetime(2026, 11, 30, 12, 0))


def test_a_revision_that_changes_nothing_is_refused():
    with pytest.raises(ValidationError, match="must change at least one"):
        revised("CLM-0001", reason="no change")


def test_events_are_immutable():
    event = drafted("CLM-0001")
    with pytest.raises(ValidationError):
        event.statement = "rewritten"  # type: ignore[misc]


def test_unknown_fields_are_refused_rather_than_dropped():
    data = json.loads(encode(drafted("CLM-0001")))
    data["sneaky"] = 1
    with pytest.raises(UnknownEventError, match="sneaky"):
        decode(json.dumps(data).encode())


def test_every_event_class_is_in_the_registry_once():
    assert set(registry.EVENT_TYPES) == {cls.__name__ for cls in registry.EVENT_CLASSES}
    assert ClaimDrafted in registry.EVENT_CLASSES


def test_a_statement_key_ignores_case_and_any_unicode_whitespace_and_never_changes():
    # Keys are stored in the read models and compared with keys computed later: the value must
    # stay what it was when the first pages were written (this one was computed then).
    from events.relation import statement_key

    spaced = "  Chain-of-thought\u00a0prompting\n\timproves  ARITHMETIC\u2003reasoning\u3000 "
    plain = "chain-of-thought prompting improves arithmetic reasoning"
    assert statement_key(spaced) == statement_key(plain) == "stmt-45f2b44cad3a25c5bd413c87"
    assert statement_key("chain-of-thought prompting improves arithmetic") != statement_key(plain)
