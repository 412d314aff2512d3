"""Reviews by people and by AI models of a given revision of a claim."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from events.claim import Confidence
from events.envelope import Event, LocalId, Text

ReviewerKind = Literal["person", "ai"]
Verdict = Literal["sound", "unsound", "inconclusive"]


class ReviewRecorded(Event):
    """A person or an AI model reviewed one revision of the claim."""

    type: Literal["ReviewRecorded"] = "ReviewRecorded"
    review_id: LocalId
    reviewer_kind: ReviewerKind
    verdict: Verdict
    confidence: Confidence
    revision: int = Field(ge=1, description="The claim revision that was reviewed.")
    summary: Text | None = None


class ReviewWithdrawn(Event):
    """A review was withdrawn; it stays in the history and leaves the counts."""

    type: Literal["ReviewWithdrawn"] = "ReviewWithdrawn"
    review_id: LocalId
    reason: Text
