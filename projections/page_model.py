"""The claim page: everything a registry page shows, as one document."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from events import Actor

ReviewState = Literal["unreviewed", "reviewed by AI", "reviewed by a person"]


class Stamp(BaseModel):
    """Who did something, when, at which log sequence."""

    by: Actor
    at: datetime
    seq: int


class SourceView(BaseModel):
    """A source with who brought it; withdrawn sources stay, struck through."""

    source_id: str
    relation: str
    citation: str | None = None
    measured: str
    breadth: str | None = None
    truncated: bool = False
    state: Literal["active", "withdrawn"] = "active"
    brought: Stamp
    corrections: list[Correction] = Field(default_factory=list)
    withdrawn: Withdrawal | None = None


class Correction(BaseModel):
    """One correction of a source: the fields it changed and who changed them."""

    stamp: Stamp
    changed: dict[str, str]
    reason: str | None = None


class Withdrawal(BaseModel):
    """Who withdrew something, and why."""

    stamp: Stamp
    reason: str


class Answer(BaseModel):
    """An answer to a disagreement."""

    stamp: Stamp
    answer: str


class DisagreementView(BaseModel):
    """A disagreement, its answers and its outcome."""

    disagreement_id: str
    argument: str
    source_id: str | None = None
    evidence: str | None = None
    state: Literal["open", "resolved"] = "open"
    filed: Stamp
    answers: list[Answer] = Field(default_factory=list)
    outcome: str | None = None
    resolved: Stamp | None = None
    resolution_note: str | None = None


class ReviewView(BaseModel):
    """A review of one revision, by a person or an AI model."""

    review_id: str
    reviewer_kind: Literal["person", "ai"]
    verdict: str
    confidence: str
    revision: int
    summary: str | None = None
    state: Literal["active", "withdrawn"] = "active"
    recorded: Stamp
    withdrawn: Withdrawal | None = None


class RelatedView(BaseModel):
    """A related claim: by id when it has a page, otherwise by its statement."""

    key: str
    claim_id: str | None = None
    statement: str | None = None
    capability: str | None = None
    review_label: str | None = None
    rank: int | None = None
    related: Stamp


class Counts(BaseModel):
    """Counts that summarize the lists on the same page (derived from them, never kept apart)."""

    sources_by_relation: dict[str, int] = Field(default_factory=dict)
    sources_active: int = 0
    sources_withdrawn: int = 0
    disagreements_open: int = 0
    disagreements_resolved: int = 0
    reviews_person: int = 0
    reviews_ai: int = 0


class Status(BaseModel):
    """Where the claim stands, on separate axes."""

    lifecycle: Literal["active", "retracted", "superseded"] = "active"
    superseded_by: str | None = None
    retraction_reason: str | None = None
    ai_review: bool = False
    person_review: bool = False
    review_state: ReviewState = "unreviewed"
    unreviewed_model_draft: bool = False
    counts_toward_scorecard: bool = True
    moves_standing: bool = True


class Notes(BaseModel):
    """Provenance of the draft: who drafted it, with what confidence, and how it could be falsified."""

    drafted: Stamp
    drafted_by_model: bool
    drafted_confidence: str | None = None
    falsifier_as_drafted: str | None = None
    falsifier_now: str | None = None


class ClaimPage(BaseModel):
    """One claim's page, as of the log sequence ``as_of_seq``."""

    claim_id: str
    slug: str
    statement: str
    revision: int = 1
    capability: str
    technique: str | None = None
    observed_on: str
    origin_paper: str | None = None
    status: Status = Field(default_factory=Status)
    counts: Counts = Field(default_factory=Counts)
    sources: list[SourceView] = Field(default_factory=list)
    disagreements: list[DisagreementView] = Field(default_factory=list)
    reviews: list[ReviewView] = Field(default_factory=list)
    related: list[RelatedView] = Field(default_factory=list)
    notes: Notes
    as_of_seq: int
    as_of_time: datetime


SourceView.model_rebuild()
