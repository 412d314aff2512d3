"""A claim's history: each of its events in log order, who acted, and what a revision or a correction changed.

What changed is read off the page itself: the fields are taken before and after the projector's ``apply``
folds the event, so a diff shows exactly what the page showed, including values an upcaster produced.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from events import Actor, Event, UnknownEventError
from events.subjects import claim_and_type
from projections.claim_page import apply
from projections.page_model import ClaimPage
from projections.repeats import Repeats, repeat_reason
from services.log import StoredEvent

DRAFTED = "ClaimDrafted"
SOURCE_FIELDS = ("relation", "citation", "measured", "breadth")


@dataclass(frozen=True)
class Change:
    """One field of the page, before and after an event."""

    field: str
    before: Any
    after: Any


@dataclass(frozen=True)
class Entry:
    """One event of the claim, where the log holds it, and what it changed on the page."""

    seq: int
    stored_at: datetime
    type: str
    event_id: str | None = None
    occurred_at: datetime | None = None
    actor: Actor | None = None
    revision: int | None = None  # the claim's revision once this event was applied
    diff: list[Change] | None = None  # for drafts, revisions and source corrections
    unreadable: str | None = None  # why the projections could not read the event, or did not fold it (a repeat)


def _claim_fields(page: ClaimPage | None, event: Event) -> dict[str, Any]:
    if page is None:
        return {}
    fields = ("statement", "capability", "technique", "observed_on")
    return {**{name: getattr(page, name) for name in fields}, "falsifier": page.notes.falsifier_now, "revision": page.revision}


def _source_fields(page: ClaimPage | None, event: Event) -> dict[str, Any]:
    source_id = getattr(event, "source_id", None)
    source = next((s for s in page.sources if s.source_id == source_id), None) if page is not None else None
    return {} if source is None else {f"sources.{source_id}.{name}": getattr(source, name) for name in SOURCE_FIELDS}


# Event type -> the page fields its diff compares.
DIFFED: dict[str, Callable[[ClaimPage | None, Event], dict[str, Any]]] = {
    DRAFTED: _claim_fields,
    "ClaimRevised": _claim_fields,
    "SourceCorrected": _source_fields,
}


def claim_history(claim_id: str, stored: Iterable[StoredEvent]) -> list[Entry] | None:
    """Every event of the claim with its diff, folded as the projector folds it; None if it was never drafted."""
    page: ClaimPage | None = None
    entries: list[Entry] = []
    repeats = Repeats()  # the claim's own ids: as many as the entries it returns
    for item in stored:
        try:
            event = item.event
        except UnknownEventError as error:
            entries.append(Entry(seq=item.seq, stored_at=item.stored_at, type=claim_and_type(item.subject)[1], unreadable=str(error)))
            continue
        if event.claim_id != claim_id:
            continue
        if (first := repeats.first_seq(event, item.seq)) is not None:  # folded by no projection
            entries.append(Entry(
                seq=item.seq, stored_at=item.stored_at, type=event.type, event_id=event.event_id,
                occurred_at=event.occurred_at, actor=event.actor, unreadable=repeat_reason(event.event_id, first),
            ))
            continue
        view = DIFFED.get(event.type)
        before = view(page, event) if view else {}
        page = apply(page, event, item.seq, item.stored_at)
        diff = None
        if view is not None:
            diff = [Change(name, before.get(name), value) for name, value in view(page, event).items() if before.get(name) != value]
        entries.append(
            Entry(
                seq=item.seq, stored_at=item.stored_at, type=event.type, event_id=event.event_id,
                occurred_at=event.occurred_at, actor=event.actor, revision=page.revision if page else None, diff=diff,
            )
        )
    return entries if page is not None else None


def select_entries(
    entries: list[Entry], *, types: set[str] | None = None, actor_kind: str | None = None, after_seq: int = 0, limit: int = 100
) -> tuple[list[Entry], int | None]:
    """The entries that pass the filters (the draft, the first revision, always does), a page at a time;
    and the sequence to ask ``after_seq`` for the next page (None at the end)."""
    kept = [e for e in entries if e.type == DRAFTED or _passes(e, types, actor_kind)]
    after = [e for e in kept if e.seq > after_seq]
    page = after[:limit]
    return page, (page[-1].seq if len(after) > limit else None)


def _passes(entry: Entry, types: set[str] | None, actor_kind: str | None) -> bool:
    if types and entry.type not in types:
        return False
    return actor_kind is None or (entry.actor is not None and entry.actor.kind == actor_kind)
