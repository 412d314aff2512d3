"""What an event copied from a registry page says beside its actor (the importer): where it was copied from
and who that page says wrote it. Disagreements and reviews carry both; the page is all that says who."""

from __future__ import annotations

from pydantic import Field

IMPORTED_FROM = "The page this was copied from; the event's actor imported it."
WRITTEN_BY = "Who the page it was copied from says wrote it (the page is all that says so); None when not imported."


def imported_from_field():
    """The ``imported_from`` field of an event a page import may write."""
    return Field(default=None, description=IMPORTED_FROM)


def written_by_field():
    """The ``written_by`` field of an event a page import may write."""
    return Field(default=None, description=WRITTEN_BY)
