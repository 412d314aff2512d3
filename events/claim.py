"""Facts about a claim itself: drafted, revised, retracted, superseded."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from events.envelope import ActorKind, ClaimId, Event, ShortText, Text
from events.imported import PageDrafter, imported_from_field

Confidence = Literal["low", "medium", "high"]


class ClaimDrafted(Event):
    """A claim was drafted from a paper, by a person or a model."""

    type: Literal["ClaimDrafted"] = "ClaimDrafted"
    schema_version: int = Field(default=2, ge=1)  # 2: imported_from, drafted_by
    slug: str = Field(pattern=r"^[a-z0-9]+(?:-[a-z0-9]+)*$", max_length=200)
    statement: Text
    capability: ShortText
    observed_on: Text
    technique: ShortText | None = None
    origin_paper: ShortText | None = Field(default=None, description="Citation or URL of the paper, if known.")
    drafted_confidence: Confidence | None = None
    falsifier: Text | None = Field(default=None, description="What would show the claim false, as drafted.")
    imported_from: ShortText | None = imported_from_field()
    drafted_by: PageDrafter | None = Field(
        default=None,
        description="Who the page it was copied from says drafted the claim (a registry page: a model it does not "
        "name); the event's actor imported it. Read only beside imported_from; None when not imported.",
    )

    # No validator ties drafted_by to imported_from: a bulk ingest assembles drafts unvalidated only for a
    # class without one (services/ingest/bulk_events.py). Readers take drafted_by only beside the page.
    @property
    def page_drafter(self) -> PageDrafter | None:
        """Who the page it was imported from says drafted it; None when not imported (its actor drafted it)."""
        return self.drafted_by if self.imported_from is not None else None

    @property
    def drafter_kind(self) -> ActorKind:
        """The kind of whoever drafted the claim: whom its page names when imported, else its actor."""
        drafter = self.page_drafter
        return drafter.kind if drafter is not None else self.actor.kind


class ClaimRevised(Event):
    """Some of a claim's fields were changed; the falsifier as drafted is kept apart and never lost."""

    type: Literal["ClaimRevised"] = "ClaimRevised"
    statement: Text | None = None
    capability: ShortText | None = None
    observed_on: Text | None = None
    technique: ShortText | None = None
    falsifier: Text | None = Field(default=None, description="The falsifier as it stands now.")
    reason: Text | None = None

    @model_validator(mode="after")
    def _changes_something(self) -> ClaimRevised:
        fields = ("statement", "capability", "observed_on", "technique", "falsifier")
        if all(getattr(self, name) is None for name in fields):
            raise ValueError(f"a revision must change at least one of: {', '.join(fields)}")
        return self


class ClaimRetracted(Event):
    """The claim was retracted; it stays readable with its whole history."""

    type: Literal["ClaimRetracted"] = "ClaimRetracted"
    reason: Text


class ClaimSuperseded(Event):
    """The claim was replaced by a newer claim."""

    type: Literal["ClaimSuperseded"] = "ClaimSuperseded"
    superseded_by: ClaimId
    reason: Text | None = None
