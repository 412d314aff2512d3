"""Disagreements are first-class: filed, answered, resolved, never hidden."""

from __future__ import annotations

from typing import Literal

from events.envelope import Event, LocalId, ShortText, Text

Outcome = Literal["upheld", "rejected", "withdrawn"]


class DisagreementFiled(Event):
    """Someone disagreed with the claim, or with one of its sources."""

    type: Literal["DisagreementFiled"] = "DisagreementFiled"
    disagreement_id: LocalId
    argument: Text
    source_id: LocalId | None = None
    evidence: ShortText | None = None


class DisagreementAnswered(Event):
    """A disagreement received an answer."""

    type: Literal["DisagreementAnswered"] = "DisagreementAnswered"
    disagreement_id: LocalId
    answer: Text


class DisagreementResolved(Event):
    """A disagreement was closed: upheld, rejected or withdrawn."""

    type: Literal["DisagreementResolved"] = "DisagreementResolved"
    disagreement_id: LocalId
    outcome: Outcome
    note: Text | None = None
