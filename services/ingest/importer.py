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
from events.disagreement import DisagreementAnswered, DisagreementFiled, DisagreementResolved
from events.imported import PAGE_IMPORTER as PAGE_IMPORTER  # who imports when no one is named
from events.imported import PageDrafter
from events.relation import ClaimsRelated, statement_key
from events.review import ReviewRecorded, ReviewWithdrawn
from events.rules import event_breach
from events.source import SourceAttached
from projections.claim_page import facts_of
from projections.page_model import ClaimPage
from services.ingest.page_format import PageSource, RegistryPage
from services.ingest.page_sections import PageDisagreement, PageReview

# The registry's pages say a model drafted them but not which one ("Drafted from the paper by a model"; a
# reviewed page's notes drop the sentence, but its claim was a model's draft all the same). An import records
# that as the page's word, beside the page, and its actor is the importer (``PAGE_IMPORTER`` when no one is
# named), as for the sources, whose pages do not say who brought them.
PAGE_DRAFTER = PageDrafter(kind="model")


@dataclass(frozen=True)
class ImportContext:
    """Who imports (the actor of every event of the page: it names no one who brought its sources unless it
    says so, and only it says that an unnamed model drafted the claim), when, and the id grouping one page's events."""

    actor: Actor
    now: datetime
    correlation_id: str


def _stable_id(prefix: str, *parts: object) -> str:
    return f"{prefix}-{hashlib.sha256('|'.join(map(str, parts)).encode()).hexdigest()[:16]}"


def source_id(claim_id: str, source: PageSource) -> str:
    """A source's id, stable across imports of the same page."""
    return _stable_id("src", claim_id, source.relation, source.measured)


def disagreement_id(claim_id: str, disagreement: PageDisagreement) -> str:
    """A disagreement's id, stable across imports of the same page: who filed what."""
    return _stable_id("dis", claim_id, disagreement.filed.writer.id, disagreement.filed.text)


def review_id(claim_id: str, review: PageReview) -> str:
    """A review's id, stable across imports of the same page: who found what of which revision."""
    return _stable_id("rev", claim_id, review.recorded.writer.id, review.revision, review.verdict, review.recorded.text)


def decide_import(page: RegistryPage, current: ClaimPage | None, ctx: ImportContext) -> list[Event]:
    """The events that bring the claim's page in line with the registry page."""
    envelope = {"claim_id": page.claim_id, "occurred_at": ctx.now, "actor": ctx.actor, "correlation_id": ctx.correlation_id}
    imported = {**envelope, "imported_from": Path(page.path).name}
    events: list[Event] = []
    if current is None:
        events.append(_drafted(page, imported))
    else:
        revision = _revision(page, current, envelope)
        if revision is not None:
            events.append(revision)
    known_sources = {s.source_id for s in current.sources} if current else set()
    for source in page.sources:
        if source_id(page.claim_id, source) not in known_sources:  # a source a page lists twice is one source
            known_sources.add(source_id(page.claim_id, source))
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
    events += _disagreements(page, current, imported)
    events += _reviews(page, current, imported)
    _within_rules(events, current, page.claim_id)
    return events


class ImportRefused(ValueError):
    """A page whose events would break a rule of the contract on its claim as the log holds it (the log's gate
    would refuse them: events/rules.py), with the rule's sentence; nothing of it is published."""


def _within_rules(events: list[Event], current: ClaimPage | None, claim_id: str) -> None:
    """``ImportRefused`` when one of ``events``, after the claim's ``current`` page and the events before it,
    breaks a rule: an import writes only what every reader admits, as the command API does."""
    facts = facts_of(current, claim_id)
    for event in events:
        broken = event_breach(facts, event)
        if broken is not None:
            raise ImportRefused(f"{event.type} of {claim_id}: {broken.message}")
        facts.fold(event)


def _said(envelope: dict, writer: Actor) -> dict:
    return {**envelope, "event_id": new_event_id(), "written_by": writer}


def _disagreements(page: RegistryPage, current: ClaimPage | None, imported: dict) -> list[Event]:
    """What the log lacks of the page's disagreements: filings, answers beyond those held, resolutions."""
    known = {d.disagreement_id: d for d in current.disagreements} if current else {}
    events: list[Event] = []
    seen: set[str] = set()
    for disagreement in page.disagreements:
        key = disagreement_id(page.claim_id, disagreement)
        if key in seen:
            continue  # listed twice, word for word by the same writer: one disagreement
        seen.add(key)
        held = known.get(key)
        if held is None:
            about = page.sources[disagreement.source - 1] if disagreement.source else None
            events.append(DisagreementFiled(
                **_said(imported, disagreement.filed.writer), disagreement_id=key, argument=disagreement.filed.text,
                source_id=source_id(page.claim_id, about) if about else None, evidence=disagreement.evidence))
        for answer in disagreement.answers[len(held.answers) if held else 0:]:
            events.append(DisagreementAnswered(**_said(imported, answer.writer), disagreement_id=key, answer=answer.text))
        if disagreement.resolved is not None and (held is None or held.state == "open"):
            events.append(DisagreementResolved(**_said(imported, disagreement.resolved.writer), disagreement_id=key,
                                               outcome=disagreement.outcome, note=disagreement.resolved.text))
    return events


def _reviews(page: RegistryPage, current: ClaimPage | None, imported: dict) -> list[Event]:
    """What the log lacks of the page's reviews: the reviews, and the withdrawals it has not recorded."""
    known = {r.review_id: r for r in current.reviews} if current else {}
    events: list[Event] = []
    seen: set[str] = set()
    for review in page.reviews:
        key, writer = review_id(page.claim_id, review), review.recorded.writer
        if key in seen:
            continue  # listed twice, word for word by the same writer: one review
        seen.add(key)
        held = known.get(key)
        if held is None:
            events.append(ReviewRecorded(
                **_said(imported, writer), review_id=key, reviewer_kind="ai" if writer.kind == "model" else "person",
                verdict=review.verdict, confidence=review.confidence, revision=review.revision,
                summary=review.recorded.text))
        if review.withdrawn is not None and (held is None or held.state == "active"):
            events.append(ReviewWithdrawn(**_said(imported, review.withdrawn.writer), review_id=key,
                                          reason=review.withdrawn.text))
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
        drafted_by=PAGE_DRAFTER,
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
        written_by=source.brought,
    )
