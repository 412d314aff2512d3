"""An event assembled from a command's validated facts is the event validation would make of them.

``services/commands/decide.py`` assembles the events of classes without validators of their own
instead of validating the command's facts a second time. Here every such command, its free text drawn
from all of Unicode (spaces to strip, controls and bidi characters to remove), gives the same event both
ways: equal, the same fields set, the same bytes in the log, and read back the same.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from events import Actor, decode, encode
from services.commands.decide import _ASSEMBLED, Context, Rejected, _assembled, _event
from services.commands.models import COMMAND_TYPES, parse_command

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


def test_every_command_whose_event_is_assembled_is_drawn_here():
    assembled = {name for name, model in COMMAND_TYPES.items() if model.event_type() in _ASSEMBLED}
    assert assembled == set(BASES)


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
    event_id = f"{event_id[:8]}-{event_id[8:12]}-{event_id[12:16]}-{event_id[16:20]}-{event_id[20:]}"
    ctx = Context(
        draw(st.sampled_from(ACTORS)), event_id, draw(st.datetimes(timezones=st.just(UTC))),
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
    cls = command.event_type()
    decided = {"reviewer_kind": "person" if ctx.actor.kind == "person" else "ai"} if body["command"] == "record_review" else {}
    fields = command.facts() | dict(
        event_id=ctx.event_id, occurred_at=ctx.now, actor=ctx.actor, correlation_id=ctx.correlation_id, prev_hash=ctx.prev_hash, **decided
    )
    validated = cls.model_validate(fields)
    assembled = _assembled(cls, _ASSEMBLED[cls], command, ctx, decided)
    assert assembled == validated
    assert assembled.model_fields_set == validated.model_fields_set
    assert encode(assembled) == encode(validated)
    assert decode(encode(assembled)) == validated
    assert _event(command, ctx, **decided) == validated  # the path deciding takes
    assert _event(command, ctx._replace(sound=True), **decided) == validated  # a bulk ingest's, which vouches for the envelope


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"now": datetime(2026, 12, 1)}, "occurred_at needs a time zone"),  # naive: validation says so
        ({"correlation_id": "x" * 65}, "at most 64 characters"),
        ({"event_id": "not-a-uuid"}, "should match pattern"),
        ({"prev_hash": "abc"}, "should match pattern"),
    ],
)
def test_an_envelope_the_check_does_not_pass_is_validated_and_refused(change, problem):
    command = parse_command(json.dumps({"command": "retract_claim", "claim_id": CLAIM, "reason": "R"}).encode())
    ctx = Context(ACTORS[0], "0190a000-0000-7000-8000-00000000c0de", datetime(2026, 12, 1, tzinfo=UTC))._replace(**change)
    with pytest.raises(Rejected, match=problem):
        _event(command, ctx)


def test_a_time_in_another_zone_is_validated_into_utc():
    command = parse_command(json.dumps({"command": "retract_claim", "claim_id": CLAIM, "reason": "R"}).encode())
    later = datetime(2026, 12, 1, 3, tzinfo=timezone(timedelta(hours=3)))
    ctx = Context(ACTORS[0], "0190a000-0000-7000-8000-00000000c0de", later)
    event = _event(command, ctx)
    assert event.occurred_at == later and event.occurred_at.tzinfo is UTC
