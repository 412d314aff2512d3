"""Whatever bytes reach the log, its readers go on: decode returns an event or says why it cannot, and
every event that decodes folds into a page and into the command side's state without raising."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events import Event, UnknownEventError, decode, encode
from projections.claim_page import apply, derive
from services.commands.claim_state import ClaimState
from tests.builders import history

CLAIM = "CLM-0631"
VALID = [json.loads(encode(event)) for event in history(CLAIM)]
FUZZ = settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=20,
)
# Values a crafted event is likely to carry: extremes of every JSON kind, and times at the edges of the calendar.
edge_values = st.one_of(
    json_values,
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from(["9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00", "2026-13-01T00:00:00Z", "\x00", "\u202e", "", " "]),
    st.datetimes(timezones=st.just(UTC)).map(datetime.isoformat),
    st.builds(
        lambda when, minutes: when.replace(tzinfo=timezone(timedelta(minutes=minutes))).isoformat(),
        st.datetimes(),
        st.integers(min_value=-23 * 60 - 59, max_value=23 * 60 + 59),
    ),
)


def read(data: bytes) -> Event | None:
    """Decode as every reader does: an event, or None for an unreadable one (and nothing else raised)."""
    try:
        return decode(data)
    except UnknownEventError as error:
        assert str(error), "an unreadable event must say why"
        return None


def fold(event: Event) -> None:
    """Fold the event after a readable history of its claim, as the projector and the command side do."""
    page, state = None, ClaimState(event.claim_id)
    for seq, earlier in enumerate([*[decode(json.dumps({**e, "claim_id": event.claim_id}).encode()) for e in VALID[:3]], event], 1):
        page = apply(page, earlier, seq, datetime(2026, 12, 5, tzinfo=UTC))
        state.evolve(earlier, seq, f"{seq:064x}")
    if page is not None:
        derive(page)


@FUZZ
@given(st.binary(max_size=400))
def test_arbitrary_bytes_decode_to_an_event_or_an_unreadable_one(data: bytes):
    read(data)


@FUZZ
@given(json_values)
def test_arbitrary_json_decodes_to_an_event_or_an_unreadable_one(value: Any):
    read(json.dumps(value).encode())


@FUZZ
@given(st.sampled_from(VALID), st.data())
def test_a_mutated_valid_event_is_folded_or_unreadable_never_a_crash(valid: dict[str, Any], data: st.DataObject):
    event = dict(valid)
    for _ in range(data.draw(st.integers(min_value=1, max_value=3))):
        field = data.draw(st.sampled_from([*event, "actor.id", "actor.kind", "new_field"]))
        action = data.draw(st.sampled_from(["replace", "delete"]))
        if field.startswith("actor."):
            actor = dict(event["actor"]) if isinstance(event.get("actor"), dict) else {}
            actor[field.split(".")[1]] = data.draw(edge_values)
            event["actor"] = actor
        elif action == "delete":
            event.pop(field, None)
        else:
            event[field] = data.draw(edge_values)
    decoded = read(json.dumps(event).encode())
    if decoded is not None:
        fold(decoded)


def test_an_occurred_at_past_the_end_of_the_calendar_is_unreadable_with_why():
    crafted = {**VALID[6], "occurred_at": "9999-12-31T23:59:59-14:00"}
    try:
        decode(json.dumps(crafted).encode())
    except UnknownEventError as error:
        assert "occurred_at" in str(error) and "outside the range" in str(error)
    else:
        raise AssertionError("an occurred_at past 9999-12-31 in UTC was decoded")


def test_json_nested_past_the_parser_limit_is_unreadable():
    assert read(b"[" * 100_000 + b"]" * 100_000) is None
