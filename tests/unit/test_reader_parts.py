"""Pieces of the claim reader: store times read the same whichever way they are parsed."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from services.log.reader import parse_store_time


def _by_hand(text: str) -> datetime:
    """The timestamp's digits, truncated to microseconds, as UTC: the meaning ``parse_store_time`` must keep."""
    stamp = text.rstrip("Z")
    if "." in stamp:
        whole, fraction = stamp.split(".", 1)
        stamp = f"{whole}.{fraction[:6].ljust(6, '0')}"
    return datetime.fromisoformat(stamp).replace(tzinfo=UTC)


def _stamps(count: int) -> list[str]:
    rng = random.Random(5)
    stamps = []
    for _ in range(count):
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(0, 9)))
        moment = datetime(rng.randint(1971, 2200), rng.randint(1, 12), rng.randint(1, 28), rng.randint(0, 23), rng.randint(0, 59), rng.randint(0, 59))
        stamps.append(moment.strftime("%Y-%m-%dT%H:%M:%S") + (f".{digits}" if digits else "") + "Z")
    return stamps


@pytest.mark.parametrize(
    "text",
    ["2026-12-03T07:37:34Z", "2026-12-03T07:37:34.8Z", "2026-12-03T07:37:34.899999999Z", "2026-12-03T07:37:34.000000001Z", "1970-01-01T00:00:00Z"]
    + _stamps(300),
)
def test_a_jetstream_timestamp_reads_as_its_digits_truncated_to_microseconds_in_utc(text: str):
    parsed = parse_store_time(text)
    assert parsed == _by_hand(text)
    assert parsed.tzinfo is UTC


def test_a_timestamp_without_the_z_still_reads_as_utc():
    assert parse_store_time("2026-12-03T07:37:34.123456789") == datetime(2026, 12, 3, 7, 37, 34, 123456, tzinfo=UTC)
