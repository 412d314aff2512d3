"""The claim-page fold: ``apply(page, event, seq, at) -> page``, pure, one handler per event type.

The fold owns the page it is given and updates it in place: pages are plain dataclasses built from
events the registry has already validated. Counts and status
are never kept by hand: ``derive(page)`` recomputes them from the lists (once per page per batch,
and at the end of ``fold``), so a count can never disagree with what it summarizes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime

from events import ActorKind, Event
from events.claim import ClaimDrafted, ClaimRetracted, ClaimRevised, ClaimSuperseded
from events.disagreement import DisagreementAnswered, DisagreementFiled, DisagreementResolved
from events.relation import ClaimsRelated, ClaimsUnrelated
from events.review import ReviewRecorded, ReviewWithdrawn
from events.rules import ClaimFacts
from events.source import RELATIONS, SourceAttached, SourceCorrected, SourceWithdrawn
from projections.base import Record
from projections.page_model import (
    Answer,
    ClaimPage,
    Correction,
    DisagreementView,
    Notes,
    RelatedView,
    ReviewView,
    SourceView,
    Stamp,
    Withdrawal,
)
from projections.repeats import Repeats
from projections.scorecard import counts_toward_scorecard, standing

Handler = Callable[[ClaimPage, Event, Stamp], None]


def apply(page: ClaimPage | None, event: Event, seq: int, at: datetime) -> ClaimPage | None:
    """Fold one event into the claim's page (None until the claim is drafted)."""
    stamp = Stamp(by=event.actor, at=at, seq=seq)
    if isinstance(event, ClaimDrafted):
        page = page if page is not None else _drafted(event, _credited(stamp, event))
    elif page is not None:
        HANDLERS[type(event)](page, event, stamp)
    else:
        return None  # an event for a claim never drafted changes no page
    page.event_count += 1
    page.as_of_seq, page.as_of_time = seq, at
    return page


def _drafted(event: ClaimDrafted, stamp: Stamp) -> ClaimPage:
    return ClaimPage(
        claim_id=event.claim_id,
        slug=event.slug,
        statement=event.statement,
        capability=event.capability,
        technique=event.technique,
        observed_on=event.observed_on,
        origin_paper=event.origin_paper,
        notes=Notes(
            drafted=stamp,
            drafted_by_model=event.drafter_kind is ActorKind.MODEL,  # an imported draft: as its page says
            drafted_by=event.page_drafter,
            drafted_confidence=event.drafted_confidence,
            falsifier_as_drafted=event.falsifier,
            falsifier_now=event.falsifier,
        ),
        as_of_seq=stamp.seq,
        as_of_time=stamp.at,
    )


def _revised(page: ClaimPage, event: ClaimRevised, stamp: Stamp) -> None:
    for name in ("statement", "capability", "observed_on", "technique"):
        value = getattr(event, name)
        if value is not None:
            setattr(page, name, value)
    if event.falsifier is not None:
        page.notes.falsifier_now = event.falsifier
    page.revision += 1


def _retracted(page: ClaimPage, event: ClaimRetracted, stamp: Stamp) -> None:
    page.status.lifecycle = "retracted"
    page.status.retraction_reason = event.reason


def _superseded(page: ClaimPage, event: ClaimSuperseded, stamp: Stamp) -> None:
    page.status.lifecycle = "superseded"
    page.status.superseded_by = event.superseded_by


def _source_attached(page: ClaimPage, event: SourceAttached, stamp: Stamp) -> None:
    if _find(page, page.sources, "source_id", event.source_id) is None:
        fields = _fields(event, "source_id", "relation", "citation", "measured", "breadth", "truncated", "imported_from")
        # Credited only when the page named someone: a page that names no one leaves the stamp as it was.
        brought = stamp if event.written_by is None else _credited(stamp, event)
        page.sources.append(SourceView(**fields, brought=brought, corrections=[]))


def _source_corrected(page: ClaimPage, event: SourceCorrected, stamp: Stamp) -> None:
    source = _find(page, page.sources, "source_id", event.source_id)
    if source is None:
        return
    changed = event.model_dump(include={"relation", "citation", "measured", "breadth"}, exclude_none=True)
    for name, value in changed.items():
        setattr(source, name, value)
    source.corrections.append(Correction(stamp=stamp, changed=changed, reason=event.reason))


def _source_withdrawn(page: ClaimPage, event: SourceWithdrawn, stamp: Stamp) -> None:
    source = _find(page, page.sources, "source_id", event.source_id)
    if source is not None and source.state == "active":
        source.state = "withdrawn"
        source.withdrawn = Withdrawal(stamp=stamp, reason=event.reason)


def _disagreement_filed(page: ClaimPage, event: DisagreementFiled, stamp: Stamp) -> None:
    stamp = _credited(stamp, event)
    if _find(page, page.disagreements, "disagreement_id", event.disagreement_id) is None:
        fields = _fields(event, "disagreement_id", "argument", "source_id", "evidence")
        page.disagreements.append(DisagreementView(**fields, filed=stamp, answers=[]))


def _disagreement_answered(page: ClaimPage, event: DisagreementAnswered, stamp: Stamp) -> None:
    stamp = _credited(stamp, event)
    disagreement = _find(page, page.disagreements, "disagreement_id", event.disagreement_id)
    if disagreement is not None:
        disagreement.answers.append(Answer(stamp=stamp, answer=event.answer))


def _disagreement_resolved(page: ClaimPage, event: DisagreementResolved, stamp: Stamp) -> None:
    stamp = _credited(stamp, event)
    disagreement = _find(page, page.disagreements, "disagreement_id", event.disagreement_id)
    if disagreement is not None and disagreement.state == "open":
        disagreement.state = "resolved"
        disagreement.outcome = event.outcome
        disagreement.resolved = stamp
        disagreement.resolution_note = event.note


def _review_recorded(page: ClaimPage, event: ReviewRecorded, stamp: Stamp) -> None:
    # Who may review, and which revision: the log's gate refuses a review against the rules before any fold
    # (events/rules.py), so every review folded here keeps them.
    stamp = _credited(stamp, event)
    if _find(page, page.reviews, "review_id", event.review_id) is None:
        fields = _fields(event, "review_id", "reviewer_kind", "verdict", "confidence", "revision", "summary")
        page.reviews.append(ReviewView(**fields, recorded=stamp))


def _review_withdrawn(page: ClaimPage, event: ReviewWithdrawn, stamp: Stamp) -> None:
    stamp = _credited(stamp, event)
    review = _find(page, page.reviews, "review_id", event.review_id)
    if review is not None and review.state == "active":
        review.state = "withdrawn"
        review.withdrawn = Withdrawal(stamp=stamp, reason=event.reason)


def _related(page: ClaimPage, event: ClaimsRelated, stamp: Stamp) -> None:
    key = event.related_key
    page.related = [r for r in page.related if r.key != key]
    fields = _fields(event, "statement", "capability", "review_label", "rank", "imported_from")
    page.related.append(RelatedView(key=key, claim_id=event.related_claim_id, **fields, related=stamp))
    page.related.sort(key=lambda r: (r.rank is None, r.rank or 0, r.related.seq))


def _unrelated(page: ClaimPage, event: ClaimsUnrelated, stamp: Stamp) -> None:
    page.related = [r for r in page.related if r.key != event.related_key]


def _credited(stamp: Stamp, event: Event) -> Stamp:
    """The stamp of an event a page import may have written, with the page and who it says wrote it."""
    imported_from = getattr(event, "imported_from", None)
    if imported_from is None and getattr(event, "written_by", None) is None:
        return stamp
    written_by = getattr(event, "written_by", None)  # a draft names no writer: the page says who drafted it
    return Stamp(by=stamp.by, at=stamp.at, seq=stamp.seq, imported_from=imported_from, written_by=written_by)


def _fields(event: Event, *names: str) -> dict:
    return {name: getattr(event, name) for name in names}


def _find(page: ClaimPage, items: list, attribute: str, value: str):
    """The first item of ``items`` whose ``attribute`` is ``value`` (None if there is none).

    The page carries, per id attribute, how many items of its list are indexed and the index. Lists of
    sources, disagreements and reviews only grow (a withdrawn one stays), so the index extends itself with
    the tail it has not seen. Without it, folding a long claim is quadratic: every event scans its lists.
    """
    known, index = page._index.get(attribute, (0, {}))
    if known > len(items):
        known, index = 0, {}
    if known < len(items):
        for item in items[known:]:
            index.setdefault(getattr(item, attribute), item)
        page._index[attribute] = (len(items), index)
    return index.get(value)


def derive(page: ClaimPage) -> ClaimPage:
    """Recompute counts and status from the page's lists."""
    counts, status = page.counts, page.status
    active = [s for s in page.sources if s.state == "active"]
    counts.sources_by_relation = {r: sum(1 for s in active if s.relation == r) for r in RELATIONS}
    counts.sources_active = len(active)
    counts.sources_withdrawn = len(page.sources) - len(active)
    counts.disagreements_open = sum(1 for d in page.disagreements if d.state == "open")
    counts.disagreements_resolved = len(page.disagreements) - counts.disagreements_open
    live = [r for r in page.reviews if r.state == "active"]
    counts.reviews_person = sum(1 for r in live if r.reviewer_kind == "person")
    counts.reviews_ai = len(live) - counts.reviews_person
    status.person_review = counts.reviews_person > 0
    status.ai_review = counts.reviews_ai > 0
    status.review_state = review_label(status.person_review, status.ai_review)
    status.unreviewed_model_draft = page.notes.drafted_by_model and not live
    status.standing = standing(counts.sources_by_relation)
    status.counts_toward_scorecard = counts_toward_scorecard(status.lifecycle, status.unreviewed_model_draft)
    return page


def review_label(person: bool, ai: bool) -> str:
    """The review label the registry shows next to a claim."""
    if person:
        return "reviewed by a person"
    return "reviewed by AI" if ai else "unreviewed"


HANDLERS: dict[type[Event], Handler] = {
    ClaimRevised: _revised,
    ClaimRetracted: _retracted,
    ClaimSuperseded: _superseded,
    SourceAttached: _source_attached,
    SourceCorrected: _source_corrected,
    SourceWithdrawn: _source_withdrawn,
    DisagreementFiled: _disagreement_filed,
    DisagreementAnswered: _disagreement_answered,
    DisagreementResolved: _disagreement_resolved,
    ReviewRecorded: _review_recorded,
    ReviewWithdrawn: _review_withdrawn,
    ClaimsRelated: _related,
    ClaimsUnrelated: _unrelated,
}


def facts_of(page: ClaimPage | None, claim_id: str) -> ClaimFacts:
    """What the contract's rules read of a claim (events/rules.py), as its page (the fold of its admitted
    events) holds it: how a reader that starts from a page judges the claim's next events."""
    if page is None:
        return ClaimFacts(claim_id)
    return ClaimFacts(
        claim_id,
        drafted=True,
        drafted_by=page.notes.drafted.by,
        lifecycle=page.status.lifecycle,
        revision=page.revision,
        sources={s.source_id: s.state for s in page.sources},
        disagreements={d.disagreement_id: d.state for d in page.disagreements},
        reviews={r.review_id: r.state for r in page.reviews},
        related={r.key for r in page.related},
    )


def fold(records: Iterable[Record]) -> ClaimPage | None:
    """A claim's page from its records in log order (the same code the projector runs: a repeat of an
    event id already folded is skipped, projections/repeats.py)."""
    page, repeats = None, Repeats()
    for record in records:
        if repeats.first_seq(record.event, record.seq) is None:
            page = apply(page, record.event, record.seq, record.at)
    return derive(page) if page is not None else None
