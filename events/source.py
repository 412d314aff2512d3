"""Facts about the evidence attached to a claim. Nothing is deleted: withdrawing is an event."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field, model_validator

from events.envelope import Actor, Event, LocalId, ShortText, Text
from events.imported import imported_from_field, written_by_field

Relation = Literal["validates", "supports", "contradicts", "qualifies", "mentions"]
RELATIONS: tuple[str, ...] = get_args(Relation)


class SourceAttached(Event):
    """A source was attached to the claim by whoever brought it."""

    type: Literal["SourceAttached"] = "SourceAttached"
    schema_version: int = Field(default=3, ge=1)  # 2: imported_from; 3: written_by
    source_id: LocalId
    relation: Relation
    citation: ShortText | None = Field(default=None, description="Where the evidence is: paper, URL, dataset.")
    measured: Text = Field(description="What was measured.")
    breadth: Text | None = Field(default=None, description="Breadth of the evidence and its caveats.")
    truncated: bool = Field(default=False, description="The text was cut short where it came from.")
    imported_from: ShortText | None = imported_from_field()
    # Who the page says brought it; None when imported from a page that does not say (as the registry's do).
    written_by: Actor | None = written_by_field()


class SourceCorrected(Event):
    """A source's description was corrected; the original stays in the log."""

    type: Literal["SourceCorrected"] = "SourceCorrected"
    source_id: LocalId
    relation: Relation | None = None
    citation: ShortText | None = None
    measured: Text | None = None
    breadth: Text | None = None
    reason: Text | None = None

    @model_validator(mode="after")
    def _corrects_something(self) -> SourceCorrected:
        if all(getattr(self, f) is None for f in ("relation", "citation", "measured", "breadth")):
            raise ValueError("a correction must change at least one of: relation, citation, measured, breadth")
        return self


class SourceWithdrawn(Event):
    """A source was withdrawn: it stays on the page, struck through, and leaves the counts."""

    type: Literal["SourceWithdrawn"] = "SourceWithdrawn"
    source_id: LocalId
    reason: Text
