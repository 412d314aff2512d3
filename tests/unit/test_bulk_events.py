"""An event a bulk ingest assembles from a command's validated facts is the event validation makes of them.

``services/ingest/bulk_events.py`` assembles the events of classes without validators of their own
instead of validating the command's facts a second time. Here every such command, its free text drawn
from all of Unicode (spaces to strip, controls and bidi characters to remove), gives the same event both
ways: equal, the same fields set, the same bytes in the log, and read back the same.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from events import Actor, decode, encode
from services.commands.decide import Context, event_of
from services.commands.models import COMMAND_TYPES, parse_command
from services.ingest.bulk_events import _TEMPLATES, assembled, sound_time_and_actor

CLAIM = "CLM-0001"
BASES: dict[str, dict] = {
    "draft_claim": {"slug": "a-b", "statement": "S", "capability": "C", "observed_on": "O", "technique": "T",
                    "origin_paper": "P", "drafted_confidence": "low", "falsifier": "F"},
    "retract_claim": {"reason": "R"},
    "supersede_claim": {"superseded_by": "CLM-0002", "reason": "R"},
    "attach_source": {"source_id": "s1", "relation": "supports", "citation": "C", "measured": "M", "breadth": "B", "truncated": True},
    "withdraw_source": {"source_id": "s1", "reason": "R"},
    "file_disagreement": {"disagreement_id": "d1", "argument": "A", "source_id": "s1", "evidence": "E"},
    "answer_disagreement": {"disagreement_id": "d1", "answer": "A"},
    "resolve_disagreement": {"disagreement_id": "d1", "outcome": "upheld", "note": "N"},
    "record_review": {"review_id": "r1", "verdict": "sound", "confidence": "high", "revision": 1, "summary": "S"},
    "withdraw_review": {"review_id": "r1", "reason": "R"},
    "unrelate_claims": {"related_key": "CLM-0002", "reason": "R"},
}
ACTORS = [Actor(id="ingest-bot", kind="model", model="pipeline-2"), Actor(id="ana", kind="person")]
HEX = "0123456789abcdef"
RETRACT = parse_command(json.dumps({"command": "retract_claim", "claim_id": CLAIM, "reason": "R"}).encode())
EVENT_ID = "0190a000-0000-7000-8000-00000000c0de"


def test_every_command_whose_event_is_assembled_is_drawn_here():
    assert {name for name, model in COMMAND_TYPES.items() if model.event_type() in _TEMPLATES} == set(BASES)


@st.composite
def commands(draw) -> tuple[dict, Context]:
    name = draw(st.sampled_from(sorted(BASES)))
    body = {"command": name, "claim_id": CLAIM}
    for field, base in BASES[name].items():
        if isinstance(base, str):
            value = draw(st.one_of(st.just(base), st.text(max_size=12), st.none()))
        else:
            value = draw(st.one_of(st.just(base), st.none()))
        if value is not None or draw(st.booleans()):
            body[field] = value
    event_id = "".join(draw(st.sampled_from(HEX)) for _ in range(32))
    ctx = Context(
        actor=draw(st.sampled_from(ACTORS)),
        event_id=f"{event_id[:8]}-{event_id[8:12]}-{event_id[12:16]}-{event_id[16:20]}-{event_id[20:]}",
        now=draw(st.datetimes(timezones=st.just(UTC))),
        correlation_id=draw(st.one_of(st.none(), st.text(max_size=64))),
        prev_hash=draw(st.one_of(st.none(), st.text(alphabet=HEX, min_size=64, max_size=64))),
    )
    return body, ctx


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(commands())
def test_an_assembled_event_is_the_validated_one(drawn):
    body, ctx = drawn
    try:
        command = parse_command(json.dumps(body).encode())
    except ValidationError:
        assume(False)
    decided = {"reviewer_kind": "person" if ctx.actor.kind == "person" else "ai"} if body["command"] == "record_review" else {}
    validated = event_of(command, ctx, decided)
    made = assembled(command, ctx, decided, vouched=True)
    assert type(made) is type(validated)
    assert made == validated
    assert made.model_fields_set == validated.model_fields_set
    assert encode(made) == encode(validated)
    assert decode(encode(made)) == validated


def test_an_event_class_with_a_validator_of_its_own_is_validated_even_when_vouched_for():
    revise = parse_command({"command": "revise_claim", "claim_id": CLAIM, "statement": "S"})
    ctx = Context(actor=ACTORS[0], event_id=EVENT_ID, now=datetime(2026, 12, 1, tzinfo=UTC))
    assert revise.event_type() not in _TEMPLATES
    assert assembled(revise, ctx, {}, vouched=True) == event_of(revise, ctx, {})


def test_an_envelope_not_vouched_for_is_validated():
    naive = Context(actor=ACTORS[0], event_id=EVENT_ID, now=datetime(2026, 12, 1))
    with pytest.raises(Exception, match="occurred_at needs a time zone"):
        assembled(RETRACT, naive, {}, vouched=False)


@pytest.mark.parametrize(
    ("now", "actor", "sound"),
    [
        (datetime(2026, 12, 1, tzinfo=UTC), ACTORS[0], True),
        (datetime(2026, 12, 1), ACTORS[0], False),  # naive: validation refuses it
        (datetime(2026, 12, 1, 3, tzinfo=timezone(timedelta(hours=3))), ACTORS[0], False),  # validation moves it to UTC
        (datetime(2026, 12, 1, tzinfo=UTC), {"id": "ana", "kind": "person"}, False),  # validation makes an Actor of it
    ],
)
def test_a_clock_reading_and_an_actor_are_vouched_for_only_as_validation_would_keep_them(now, actor, sound):
    assert sound_time_and_actor(now, actor) is sound


def test_a_time_in_another_zone_is_validated_into_utc():
    later = datetime(2026, 12, 1, 3, tzinfo=timezone(timedelta(hours=3)))
    ctx = Context(actor=ACTORS[0], event_id=EVENT_ID, now=later)
    event = assembled(RETRACT, ctx, {}, vouched=sound_time_and_actor(ctx.now, ctx.actor))
    assert event.occurred_at == later and event.occurred_at.tzinfo is UTC


def test_an_assembled_event_is_as_frozen_as_a_validated_one():
    ctx = replace(Context(actor=ACTORS[0], event_id=EVENT_ID, now=datetime(2026, 12, 1, tzinfo=UTC)), prev_hash="a" * 64)
    made = assembled(RETRACT, ctx, {}, vouched=True)
    with pytest.raises(ValidationError, match="frozen"):
        made.reason = "changed"
    assert made.model_copy(update={"reason": "other"}).reason == "other" and made.reason == "R"
