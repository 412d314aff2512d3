"""Reviews by people and by AI models of a given revision of a claim."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from events.claim import Confidence
from events.envelope import Actor, Event, LocalId, ShortText, Text
from events.imported import imported_from_field, written_by_field

ReviewerKind = Literal["person", "ai"]
Verdict = Literal["sound", "unsound", "inconclusive"]


class ReviewRecorded(Event):
    """A person or an AI model reviewed one revision of the claim."""

    type: Literal["ReviewRecorded"] = "ReviewRecorded"
    schema_version: int = Field(default=2, ge=1)  # 2: imported_from, written_by
    review_id: LocalId
    reviewer_kind: ReviewerKind
    verdict: Verdict
    confidence: Confidence
    revision: int = Field(ge=1, description="The claim revision that was reviewed.")
    summary: Text | None = None
    imported_from: ShortText | None = imported_from_field()
    written_by: Actor | None = written_by_field()


class ReviewWithdrawn(Event):
    """A review was withdrawn; it stays in the history and leaves the counts."""

    type: Literal["ReviewWithdrawn"] = "ReviewWithdrawn"
    schema_version: int = Field(default=2, ge=1)  # 2: imported_from, written_by
    review_id: LocalId
    reason: Text
    imported_from: ShortText | None = imported_from_field()
    written_by: Actor | None = written_by_field()
