"""Facts about the evidence attached to a claim. Nothing is deleted: withdrawing is an event."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field, model_validator

from events.envelope import Event, LocalId, ShortText, Text

Relation = Literal["validates", "supports", "contradicts", "qualifies", "mentions"]
RELATIONS: tuple[str, ...] = get_args(Relation)


class SourceAttached(Event):
    """A source was attached to the claim by whoever brought it."""

    type: Literal["SourceAttached"] = "SourceAttached"
    schema_version: int = Field(default=2, ge=1)  # 2: imported_from
    source_id: LocalId
    relation: Relation
    citation: ShortText | None = Field(default=None, description="Where the evidence is: paper, URL, dataset.")
    measured: Text = Field(description="What was measured.")
    breadth: Text | None = Field(default=None, description="Breadth of the evidence and its caveats.")
    truncated: bool = Field(default=False, description="The text was cut short where it came from.")
    imported_from: ShortText | None = Field(
        default=None,
        description="The page this was copied from, which does not say who brought it; the event's actor imported it.",
    )


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
