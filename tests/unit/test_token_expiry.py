"""Token expiries as a person writes them (``90d``, ``2027-03-01T00:00:00Z``), and when a token counts as
expired: pure, with the clock passed in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from events import Actor
from services.cli.actors import expires_label
from services.identity.actors import TokenExpired, TokenRecord
from services.identity.expiry import BadExpiry, expiry, parse_duration, parse_time

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("90d", timedelta(days=90)), ("12h", timedelta(hours=12)), ("30m", timedelta(minutes=30)),
        ("45s", timedelta(seconds=45)), ("2w", timedelta(weeks=2)), ("1d12h", timedelta(days=1, hours=12)),
        (" 7D ", timedelta(days=7)),
    ],
)
def test_a_duration_is_numbers_with_units(text: str, expected: timedelta):
    assert parse_duration(text, option="--expires-in") == expected


@pytest.mark.parametrize("text", ["90", "90 days", "d", "-1d", "1.5h", "1y", "", "12h30"])
def test_a_duration_that_does_not_read_says_which_forms_do(text: str):
    with pytest.raises(BadExpiry) as refused:
        parse_duration(text, option="--expires-in")
    assert f"--expires-in {text!r} is not a duration: a number and a unit, s m h d or w, e.g. 90d" in str(refused.value)


def test_no_time_at_all_is_refused_for_an_expiry_and_means_at_once_for_a_grace_period():
    with pytest.raises(BadExpiry, match="is no time at all: give a duration of at least 1s"):
        parse_duration("0d", option="--expires-in")
    with pytest.raises(BadExpiry, match="is not a duration"):
        parse_duration("0", option="--expires-in")
    assert parse_duration("0", option="--grace", zero=True) == parse_duration("0s", option="--grace", zero=True) == timedelta(0)


def test_a_duration_past_a_century_is_refused_before_any_arithmetic_overflows():
    with pytest.raises(BadExpiry, match="longer than a hundred years"):
        parse_duration("999999w" * 200, option="--expires-in")
    assert parse_duration("36525d", option="--expires-in") == timedelta(days=36525)


def test_an_expiry_time_needs_a_zone_is_kept_in_utc_and_must_be_in_the_future():
    assert parse_time("2027-03-01T01:00:00+01:00", option="--expires", now=NOW) == datetime(2027, 3, 1, tzinfo=UTC)
    with pytest.raises(BadExpiry, match=r"--expires 2027-03-01T00:00:00 has no time zone: add one, e\.g\. --expires 2027-03-01T00:00:00Z"):
        parse_time("2027-03-01T00:00:00", option="--expires", now=NOW)
    with pytest.raises(BadExpiry, match=r"--expires 'next march' is not an ISO 8601 time: write it like --expires 2027-03-01T00:00:00Z"):
        parse_time("next march", option="--expires", now=NOW)
    with pytest.raises(BadExpiry, match=r"has already passed \(it is now 2026-12-06 12:00:00Z\): give a later time"):
        parse_time("2026-12-06T12:00:00Z", option="--expires", now=NOW)


def test_an_expiry_comes_from_one_option_or_none():
    assert expiry(expires_in=None, expires=None, now=NOW) is None
    assert expiry(expires_in="90d", expires=None, now=NOW) == NOW + timedelta(days=90)
    assert expiry(expires_in=None, expires="2027-03-01T00:00:00Z", now=NOW) == datetime(2027, 3, 1, tzinfo=UTC)
    with pytest.raises(BadExpiry, match="give --expires-in 90d or --expires 2027-03-01T00:00:00Z, not both"):
        expiry(expires_in="90d", expires="2027-03-01T00:00:00Z", now=NOW)


def test_a_token_expires_at_its_expiry_and_one_recorded_without_an_expiry_never_does():
    ada = Actor(id="ada", kind="person")
    old = TokenRecord.model_validate_json(
        '{"token_id": "0123456789ab", "actor": {"id": "ada", "kind": "person"}, "created_at": "2026-01-01T00:00:00Z"}'
    )
    assert old.expires_at is None and old.live(NOW + timedelta(days=36525))
    assert expires_label(old, NOW) == "never"
    record = TokenRecord(token_id="0123456789ab", actor=ada, created_at=NOW, expires_at=NOW + timedelta(hours=1))
    assert record.live(NOW + timedelta(minutes=59)) and not record.expired(NOW + timedelta(minutes=59))
    assert record.expired(NOW + timedelta(hours=1)) and not record.live(NOW + timedelta(hours=1))
    assert expires_label(record, NOW) == "2026-12-06 13:00:00Z"
    assert expires_label(record, NOW + timedelta(hours=2)) == "2026-12-06 13:00:00Z (expired)"
    assert not record.model_copy(update={"revoked_at": NOW}).live(NOW)
    assert str(TokenExpired(record)) == (
        "the bearer token 0123456789ab expired at 2026-12-06 13:00:00Z: ask for a new one "
        "(`claimlog actors rotate ada` issues it)"
    )
