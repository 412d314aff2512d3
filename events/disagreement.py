"""Disagreements are first-class: filed, answered, resolved, never hidden."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from events.envelope import Actor, Event, LocalId, ShortText, Text
from events.imported import imported_from_field, written_by_field

Outcome = Literal["upheld", "rejected", "withdrawn"]


class DisagreementFiled(Event):
    """Someone disagreed with the claim, or with one of its sources."""

    type: Literal["DisagreementFiled"] = "DisagreementFiled"
    schema_version: int = Field(default=2, ge=1)  # 2: imported_from, written_by
    disagreement_id: LocalId
    argument: Text
    source_id: LocalId | None = None
    evidence: ShortText | None = None
    imported_from: ShortText | None = imported_from_field()
    written_by: Actor | None = written_by_field()


class DisagreementAnswered(Event):
    """A disagreement received an answer."""

    type: Literal["DisagreementAnswered"] = "DisagreementAnswered"
    schema_version: int = Field(default=2, ge=1)  # 2: imported_from, written_by
    disagreement_id: LocalId
    answer: Text
    imported_from: ShortText | None = imported_from_field()
    written_by: Actor | None = written_by_field()


class DisagreementResolved(Event):
    """A disagreement was closed: upheld, rejected or withdrawn."""

    type: Literal["DisagreementResolved"] = "DisagreementResolved"
    schema_version: int = Field(default=2, ge=1)  # 2: imported_from, written_by
    disagreement_id: LocalId
    outcome: Outcome
    note: Text | None = None
    imported_from: ShortText | None = imported_from_field()
    written_by: Actor | None = written_by_field()
