"""What an event copied from a registry page says beside its actor (the importer): where it was copied from
and who that page says wrote it (for a source, who brought it). Disagreements, reviews and sources carry both,
a draft who the page says drafted it;
the page is all that says who."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from events.envelope import Actor, ActorKind, ShortText

IMPORTED_FROM = "The page this was copied from; the event's actor imported it."
WRITTEN_BY = "Who the page it was copied from says wrote it (the page is all that says so); None when not imported."
# Who imports pages when no one is named (``claimlog ingest``): the actor of what a page import appends.
PAGE_IMPORTER = Actor(id="claimlog-ingest", kind="service")


class PageDrafter(BaseModel):
    """Who a page says drafted a claim, as far as it says: a kind, and a model's name if the page gives one.

    Not an actor: a registry page says "drafted ... by a model" and names neither an id nor the model."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: ActorKind
    model: ShortText | None = Field(default=None, description="The model's name, when the page names it.")

    @model_validator(mode="after")
    def _only_a_model_is_named_as_one(self) -> PageDrafter:
        if self.model is not None and self.kind is not ActorKind.MODEL:
            raise ValueError(f"only a model drafter names a model, not a {self.kind.value}")
        return self


def page_drafter_label(kind: str, model: str | None = None) -> str:
    """Who a page says drafted a claim, as every page says it: "an unnamed model", "a model (NAME)"."""
    return f"a {kind} ({model})" if model else f"an unnamed {kind}"


def imported_from_field():
    """The ``imported_from`` field of an event a page import may write."""
    return Field(default=None, description=IMPORTED_FROM)


def written_by_field():
    """The ``written_by`` field of an event a page import may write."""
    return Field(default=None, description=WRITTEN_BY)
