"""A claim's history: each of its events in log order, who acted, and what a revision or a correction changed.

What changed is read off the page itself: the fields are taken before and after the projector's ``apply``
folds the event, so a diff shows exactly what the page showed, including values an upcaster produced.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from events import Actor, Event
from events.envelope import actor_label
from events.imported import page_drafter_label
from projections.claim_page import apply
from projections.page_model import ClaimPage
from services.admission import Admitted, Gate, InOrder, Refused
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
    unreadable: str | None = None  # why the gate refused it (services/admission/): no projection folded it


def _claim_fields(page: ClaimPage | None, event: Event) -> dict[str, Any]:
    if page is None:
        return {}
    fields = ("statement", "capability", "technique", "observed_on")
    claim = {name: getattr(page, name) for name in fields}
    return {**claim, **_drafter(page), "falsifier": page.notes.falsifier_now, "revision": page.revision}


def _drafter(page: ClaimPage) -> dict[str, str]:
    """Of a draft imported from a page: who the page says drafted it, and who imported it from which page."""
    notes = page.notes
    if notes.drafted_by is None:
        return {}  # the event's actor drafted it: the entry names it
    said = page_drafter_label(notes.drafted_by.kind, notes.drafted_by.model)
    by = notes.drafted.by
    return {"drafted_by": f"{said}; imported by {actor_label(by.id, by.kind, by.model)} from {notes.drafted.imported_from}"}


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


def claim_history(claim_id: str, stored: Iterable[StoredEvent], *, gate: Gate | None = None) -> list[Entry] | None:
    """Every event of the claim with its diff, folded as the projector folds it; None if it was never drafted.

    A message the gate refuses (``gate``: the key registry's; without one, no signature is required) is
    listed with why, and never as the act of the actor its body names: no actor, no event id."""
    page: ClaimPage | None = None
    entries: list[Entry] = []
    in_order = InOrder(gate or Gate())  # the claim's own ids: as many as the entries it returns
    for item in stored:
        verdict = in_order.admit(item)
        if isinstance(verdict, Refused):
            entries.append(Entry(seq=item.seq, stored_at=item.stored_at, type=verdict.type, unreadable=verdict.reason))
            continue
        if not isinstance(verdict, Admitted):
            continue  # a key-registry change (its subject is never a claim's): a fact of the registry, no claim's act
        event = verdict.event
        if event.claim_id != claim_id:
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
