"""The claim page: everything a registry page shows, as one document.

Plain slotted dataclasses, so the projector can fold thousands of events a second into them; pydantic
validates and serializes them (``PAGE``) when they go into or come out of the database and the API.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, Literal, get_args

from pydantic import Field, TypeAdapter, computed_field
from pydantic.json_schema import SkipJsonSchema

from events import Actor
from events.imported import PageDrafter
from events.review import ReviewerKind

ReviewState = Literal["unreviewed", "reviewed by AI", "reviewed by a person"]
Lifecycle = Literal["active", "retracted", "superseded"]
Presence = Literal["active", "withdrawn"]  # a withdrawn source or review stays on the page, struck through
# Where a claim stands by its active sources (projections/scorecard.py, STANDINGS).
Standing = Literal["validated", "supported", "contested", "refuted", "untested"]
LIFECYCLES: tuple[str, ...] = get_args(Lifecycle)


@dataclass(slots=True, kw_only=True)
class Stamp:
    """Who did something, when, at which log sequence."""

    by: Actor
    at: datetime
    seq: int
    # Copied from a registry page (disagreements, reviews and what was done to them, and sources the page
    # says who brought): the page, and who it says did it; ``by`` is then who imported it.
    imported_from: str | None = None
    written_by: Actor | None = None


@dataclass(slots=True, kw_only=True)
class SourceView:
    """A source with who brought it; withdrawn sources stay, struck through."""

    source_id: str
    relation: str
    citation: str | None = None
    measured: str
    breadth: str | None = None
    truncated: bool = False
    state: Presence = "active"
    brought: Stamp  # who attached it; with imported_from, who imported it (and written_by, if the page says who brought it)
    imported_from: str | None = None
    corrections: list[Correction] = field(default_factory=list)
    withdrawn: Withdrawal | None = None


@dataclass(slots=True, kw_only=True)
class Correction:
    """One correction of a source: the fields it changed and who changed them."""

    stamp: Stamp
    changed: dict[str, str]
    reason: str | None = None


@dataclass(slots=True, kw_only=True)
class Withdrawal:
    """Who withdrew something, and why."""

    stamp: Stamp
    reason: str


@dataclass(slots=True, kw_only=True)
class Answer:
    """An answer to a disagreement."""

    stamp: Stamp
    answer: str


@dataclass(slots=True, kw_only=True)
class DisagreementView:
    """A disagreement, its answers and its outcome."""

    disagreement_id: str
    argument: str
    source_id: str | None = None
    evidence: str | None = None
    state: Literal["open", "resolved"] = "open"
    filed: Stamp
    answers: list[Answer] = field(default_factory=list)
    outcome: str | None = None
    resolved: Stamp | None = None
    resolution_note: str | None = None


@dataclass(slots=True, kw_only=True)
class ReviewView:
    """A review of one revision, by a person or an AI model."""

    review_id: str
    reviewer_kind: ReviewerKind
    verdict: str
    confidence: str
    revision: int
    summary: str | None = None
    state: Presence = "active"
    recorded: Stamp
    withdrawn: Withdrawal | None = None


@dataclass(slots=True, kw_only=True)
class RelatedView:
    """A related claim: by id when it has a page, otherwise by its statement."""

    key: str
    claim_id: str | None = None
    statement: str | None = None
    capability: str | None = None
    review_label: str | None = None  # as the relating page labelled it, stored text
    rank: int | None = None
    related: Stamp
    imported_from: str | None = None
    # Filled when the page is read, from the related claim's own page: its review state now, and whether
    # the stored label says otherwise. Never folded from events (None and False in the read model).
    review_state_now: str | None = None
    label_disagrees: bool = False


@dataclass(slots=True, kw_only=True)
class Counts:
    """Counts that summarize the lists on the same page (derived from them, never kept apart)."""

    sources_by_relation: dict[str, int] = field(default_factory=dict)
    sources_active: int = 0
    sources_withdrawn: int = 0
    disagreements_open: int = 0
    disagreements_resolved: int = 0
    reviews_person: int = 0
    reviews_ai: int = 0


@dataclass(slots=True, kw_only=True)
class Status:
    """Where the claim stands, on separate axes."""

    lifecycle: Lifecycle = "active"
    superseded_by: str | None = None
    retraction_reason: str | None = None
    ai_review: bool = False
    person_review: bool = False
    review_state: ReviewState = "unreviewed"
    unreviewed_model_draft: bool = False
    # Deprecated (CHANGELOG): what the sources say, even of a claim that counts for nothing; read
    # ``evidence`` and ``counted_standing`` instead.
    standing: Standing = "untested"
    counts_toward_scorecard: bool = True

    @computed_field
    @property
    def moves_standing(self) -> bool:
        """Whether the claim's standing counts: the same rule as the scorecard, serialized under its own name."""
        return self.counts_toward_scorecard

    @computed_field
    @property
    def evidence(self) -> Standing:
        """What the claim's active sources say (validated ... untested), whether or not the claim counts."""
        return self.standing

    @computed_field
    @property
    def counted_standing(self) -> Standing | None:
        """The standing the claim gives its technique on the scorecard; null when it counts for none (an
        unreviewed model draft, a retracted or superseded claim)."""
        return self.standing if self.counts_toward_scorecard else None


@dataclass(slots=True, kw_only=True)
class Notes:
    """Provenance of the draft: who drafted it, with what confidence, and how it could be falsified."""

    # Who appended the draft, when; for a draft imported from a page, who imported it, with the page.
    drafted: Stamp
    drafted_by_model: bool  # what keeps an unreviewed draft out of the scorecard (projections/scorecard.py)
    # Imported from a page: who the page says drafted it (a registry page: an unnamed model), not an actor.
    drafted_by: PageDrafter | None = None
    drafted_confidence: str | None = None
    falsifier_as_drafted: str | None = None
    falsifier_now: str | None = None


# The fold's lookup by id, carried by the page it indexes (``claim_page._find``): never an argument, never
# compared, printed, serialized or in the schema; a page read from JSON or made by ``replace`` starts without one.
FoldIndex = Annotated[dict[str, Any], Field(exclude=True), SkipJsonSchema()]


@dataclass(slots=True, kw_only=True)
class ClaimPage:
    """One claim's page, as of the log sequence ``as_of_seq``."""

    claim_id: str
    slug: str
    statement: str
    revision: int = 1
    capability: str
    technique: str | None = None
    observed_on: str
    origin_paper: str | None = None
    status: Status = field(default_factory=Status)
    counts: Counts = field(default_factory=Counts)
    sources: list[SourceView] = field(default_factory=list)
    disagreements: list[DisagreementView] = field(default_factory=list)
    reviews: list[ReviewView] = field(default_factory=list)
    related: list[RelatedView] = field(default_factory=list)
    notes: Notes
    event_count: int = 0  # the claim's events folded into this page (as-of reads start from every SNAPSHOT_EVERY-th)
    as_of_seq: int
    as_of_time: datetime
    _index: FoldIndex = field(default_factory=dict, init=False, repr=False, compare=False)


PAGE: TypeAdapter[ClaimPage] = TypeAdapter(ClaimPage)
