"""When a bearer token stops working, as a person writes it: a duration (``90d``, ``12h``, ``1d12h``) or a
time (ISO 8601 with a zone). Pure: the clock is passed in, and a refusal says what to type instead."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
DURATION = re.compile(r"(?:[0-9]{1,6}[smhdw])+")
# Past a century an expiry is no longer a limit: leaving the option out (never expires) says so plainly.
LONGEST = timedelta(days=36525)
FORMS = "a number and a unit, s m h d or w, e.g. 90d, 12h or 1d12h"


class BadExpiry(ValueError):
    """A duration or expiry time that does not read, or one that has already passed."""


def parse_duration(text: str, *, option: str, zero: bool = False) -> timedelta:
    """``text`` (``90d``, ``12h``, ``1d12h``; ``0`` too when ``zero``) as a duration, or ``BadExpiry`` naming ``option``."""
    given = text.strip().lower()
    if zero and given == "0":
        return timedelta(0)
    if not DURATION.fullmatch(given):
        raise BadExpiry(f"{option} {_shown(text)!r} is not a duration: {FORMS} (for example {option} 90d)")
    seconds = sum(int(number) * UNITS[unit] for number, unit in re.findall(r"([0-9]+)([smhdw])", given))
    if seconds > LONGEST.total_seconds():
        raise BadExpiry(f"{option} {_shown(text)} is longer than a hundred years: give a shorter one (a token that never expires has no --expires-in)")
    duration = timedelta(seconds=seconds)
    if not duration and not zero:
        raise BadExpiry(f"{option} {text} is no time at all: give a duration of at least 1s, e.g. {option} 90d")
    return duration


def parse_time(text: str, *, option: str, now: datetime) -> datetime:
    """``text`` as an ISO 8601 time with a zone, in UTC and after ``now``, or ``BadExpiry`` naming ``option``."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise BadExpiry(f"{option} {_shown(text)!r} is not an ISO 8601 time: write it like {option} 2027-03-01T00:00:00Z") from None
    if moment.tzinfo is None:
        raise BadExpiry(f"{option} {text} has no time zone: add one, e.g. {option} {moment:%Y-%m-%dT%H:%M:%S}Z for UTC")
    moment = moment.astimezone(UTC)
    if moment <= now:
        raise BadExpiry(
            f"{option} {text} has already passed (it is now {stamp(now)}): give a later time, or a duration with --expires-in 90d"
        )
    return moment


def expiry(*, expires_in: str | None, expires: str | None, now: datetime) -> datetime | None:
    """When a new token stops working, from ``--expires-in`` or ``--expires`` (at most one); None for never."""
    if expires_in is not None and expires is not None:
        raise BadExpiry(f"give --expires-in {expires_in} or --expires {expires}, not both: one says how long, the other until when")
    if expires_in is not None:
        return now + parse_duration(expires_in, option="--expires-in")
    if expires is not None:
        return parse_time(expires, option="--expires", now=now)
    return None


def stamp(moment: datetime) -> str:
    """A time as the CLI and the API's messages show it: UTC to the second, ``2027-03-01 00:00:00Z``."""
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M:%S}Z"


def _shown(text: str) -> str:
    return text if len(text) <= 40 else f"{text[:40]}..."
