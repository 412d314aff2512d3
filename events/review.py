"""Reviews by people and by AI models of a given revision of a claim."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from events.claim import Confidence
from events.envelope import Actor, ActorKind, Event, LocalId, ShortText, Text
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


def revision_refusal(reviewed: int, current: int) -> str | None:
    """Why a review of revision ``reviewed`` cannot be recorded on a claim at revision ``current`` (None: it
    can). The command side refuses such a command, and every reader of the log refuses such an event."""
    if reviewed > current:
        return f"revision {reviewed} does not exist: the claim is at revision {current}"
    return None


def review_refusal(drafter: Actor, reviewer: Actor) -> tuple[str, str] | None:
    """Why ``reviewer`` may not review a claim ``drafter`` drafted, as (reason, sentence); None if it may."""
    if reviewer.kind is ActorKind.SERVICE:
        return "reviewer_not_allowed", "reviews are by a person or an AI model, not by a service"
    if reviewer.id == drafter.id:
        return "own_draft", f"{reviewer.id!r} drafted this claim: a claim is reviewed by someone other than its drafter"
    if reviewer.kind is ActorKind.MODEL and drafter.kind is ActorKind.MODEL and reviewer.model == drafter.model:
        return "same_model", (
            f"the claim was drafted by the model {drafter.model!r}: a model draft is reviewed by a person or by "
            "another AI model"
        )
    return None
