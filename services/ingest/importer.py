"""Turn a registry page into the events that produce it, given what the log already holds.

``decide_import`` is pure: it compares the page with the claim's current page (folded from the log)
and returns only what is missing, so importing the same page twice publishes nothing new.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from events import Actor, Event, new_event_id
from events.claim import ClaimDrafted, ClaimRevised
from events.relation import ClaimsRelated, statement_key
from events.source import SourceAttached
from projections.page_model import ClaimPage
from services.ingest.page_format import PageSource, RegistryPage

# The registry's pages say a model drafted them but not which one.
REGISTRY_MODEL = Actor(id="registry-drafter", kind="model", model="unnamed registry drafting model")
# Who imports pages when no one is named: the pages do not say who brought their sources, so the sources
# are recorded as imported by this service, from the page, never as brought by the drafting model.
PAGE_IMPORTER = Actor(id="claimlog-ingest", kind="service")


@dataclass(frozen=True)
class ImportContext:
    """Who imports (the actor of the sources and relations: the page names no one who brought them), when,
    and the id grouping one page's events. The draft is the unnamed model's the page says drafted it."""

    actor: Actor
    now: datetime
    correlation_id: str


def source_id(claim_id: str, source: PageSource) -> str:
    """A source's id, stable across imports of the same page."""
    digest = hashlib.sha256(f"{claim_id}|{source.relation}|{source.measured}".encode()).hexdigest()
    return f"src-{digest[:16]}"


def decide_import(page: RegistryPage, current: ClaimPage | None, ctx: ImportContext) -> list[Event]:
    """The events that bring the claim's page in line with the registry page."""
    envelope = {"claim_id": page.claim_id, "occurred_at": ctx.now, "actor": ctx.actor, "correlation_id": ctx.correlation_id}
    drafter = {**envelope, "actor": REGISTRY_MODEL}
    imported = {**envelope, "imported_from": Path(page.path).name}
    events: list[Event] = []
    if current is None:
        events.append(_drafted(page, drafter))
    else:
        revision = _revision(page, current, drafter)
        if revision is not None:
            events.append(revision)
    known_sources = {s.source_id for s in current.sources} if current else set()
    for source in page.sources:
        if source_id(page.claim_id, source) not in known_sources:
            events.append(_attached(page.claim_id, source, imported))
    known_related = {r.key for r in current.related} if current else set()
    for rank, related in enumerate(page.related, start=1):
        if statement_key(related.statement) not in known_related:
            events.append(
                ClaimsRelated(
                    event_id=new_event_id(),
                    **imported,
                    statement=related.statement,
                    capability=related.capability,
                    review_label=related.review_label,
                    rank=rank,
                )
            )
    return events


def _drafted(page: RegistryPage, envelope: dict) -> ClaimDrafted:
    return ClaimDrafted(
        event_id=new_event_id(),
        **envelope,
        slug=page.slug,
        statement=page.statement,
        capability=page.capability,
        observed_on=page.observed_on,
        drafted_confidence=page.drafted_confidence,
        falsifier=page.falsifier,
    )


def _revision(page: RegistryPage, current: ClaimPage, envelope: dict) -> ClaimRevised | None:
    changed = {
        name: getattr(page, name)
        for name in ("statement", "capability", "observed_on")
        if getattr(page, name) != getattr(current, name)
    }
    if page.falsifier and page.falsifier != current.notes.falsifier_now:
        changed["falsifier"] = page.falsifier
    if not changed:
        return None
    return ClaimRevised(event_id=new_event_id(), **envelope, **changed, reason="the registry page changed")


def _attached(claim_id: str, source: PageSource, envelope: dict) -> SourceAttached:
    return SourceAttached(
        event_id=new_event_id(),
        **envelope,
        source_id=source_id(claim_id, source),
        relation=source.relation,
        measured=source.measured,
        breadth=source.breadth,
        truncated=source.truncated,
    )
