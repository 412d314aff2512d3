"""Stream and subject names: the only place subject strings are built."""

from __future__ import annotations

DEFAULT_STREAM = "CLAIMS"
ROOT = "claims"
ALL_EVENTS = f"{ROOT}.>"


def event_subject(claim_id: str, event_type: str) -> str:
    """The subject an event of this claim and type is stored under."""
    return f"{ROOT}.{claim_id}.{event_type}"


def claim_filter(claim_id: str) -> str:
    """The subject filter matching every event of one claim."""
    return f"{ROOT}.{claim_id}.*"


def claim_of(subject: str) -> str:
    """The claim id a stored subject belongs to."""
    return subject.split(".", 2)[1]
