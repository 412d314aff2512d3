"""The rules a claim's events keep, judged from the claim's own earlier events: one copy, held by the contract.

The command side applies them to a command before it writes its event (services/commands/decide.py), and
the log's gate to every stored event (services/admission/in_order.py), so an event a producer publishes
around the API is held to what the API holds a command to. A command carries its event's fields, so one
rule reads either. What needs more than the claim's own events (a slug another claim took, a claim
referred to by id) is the command side's alone: a claim's events are judged alike in any partition and
replay, whatever order other claims were folded in.

``ClaimFacts`` is what the rules look at, folded from the claim's admitted events (``fold``); ``breach``
says which rule an event (or a command) breaks, with a sentence a producer can act on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from events.envelope import Actor
from events.review import review_refusal, revision_refusal

# Event types a retracted or superseded claim no longer takes; what is already on it can still be
# withdrawn, corrected, answered, resolved or unrelated.
CLOSED_TO = frozenset(
    {"ClaimRevised", "ClaimRetracted", "ClaimSuperseded", "SourceAttached", "DisagreementFiled", "ReviewRecorded", "ClaimsRelated"}
)


@dataclass(frozen=True, slots=True)
class Breach:
    """A rule an event breaks: the sort of refusal (not_found, conflict, forbidden, invalid), a
    machine-readable reason and a sentence."""

    kind: str
    reason: str
    message: str


@dataclass(slots=True)
class ClaimFacts:
    """What the rules look at of one claim, folded from its admitted events in log order."""

    claim_id: str
    drafted: bool = False
    drafted_by: Actor | None = None  # who drafted it
    lifecycle: str = "active"  # active, retracted, superseded
    revision: int = 0
    sources: dict[str, str] = field(default_factory=dict)  # source id -> active / withdrawn
    disagreements: dict[str, str] = field(default_factory=dict)  # id -> open / resolved
    reviews: dict[str, str] = field(default_factory=dict)  # id -> active / withdrawn
    related: set[str] = field(default_factory=set)  # related keys

    def copy(self) -> ClaimFacts:
        """The same facts, to fold on without changing these."""
        return ClaimFacts(
            self.claim_id, self.drafted, self.drafted_by, self.lifecycle, self.revision,
            dict(self.sources), dict(self.disagreements), dict(self.reviews), set(self.related),
        )

    def fold(self, event) -> None:
        """Take one admitted event into account."""
        folding = _FOLDS.get(event.type)
        if folding is not None:
            folding(self, event)


def breach(facts: ClaimFacts, event_type: str, item, actor: Actor, *, what: str | None = None) -> Breach | None:
    """The rule an event of ``event_type`` with the fields of ``item`` (the event, or the command that asks
    for it) by ``actor`` breaks on a claim with ``facts``; None when it keeps them all. ``what``: how the
    refusal names the act (the command's name; the event type when not given)."""
    claim = facts.claim_id
    if event_type == "ClaimDrafted":
        return Breach("conflict", "claim_exists", f"{claim} is already drafted; revise it instead") if facts.drafted else None
    if not facts.drafted:
        return Breach("not_found", "claim_not_found", f"no claim {claim}: draft it first")
    if event_type in CLOSED_TO and facts.lifecycle != "active":
        return Breach("conflict", f"claim_{facts.lifecycle}", f"{claim} is {facts.lifecycle}: it cannot take {what or event_type}")
    rule = _RULES.get(event_type)
    return rule(facts, item, actor) if rule is not None else None


def event_breach(facts: ClaimFacts, event) -> Breach | None:
    """The rule a stored event breaks on a claim with ``facts`` (None: it keeps them all)."""
    return breach(facts, event.type, event, event.actor)


def _new_item(facts: ClaimFacts, item, kind: str, items: dict[str, str]) -> Breach | None:
    """A source, disagreement or review id is used once per claim."""
    key = getattr(item, f"{kind}_id")
    if key in items:
        return Breach("conflict", f"{kind}_exists", f"{facts.claim_id} already has a {kind} {key!r}")
    return None


def _open_item(facts: ClaimFacts, item, kind: str, items: dict[str, str], closed: str) -> Breach | None:
    """Acting on a source, disagreement or review needs it to exist and not to be ``closed`` already."""
    key = getattr(item, f"{kind}_id")
    found = items.get(key)
    if found is None:
        return Breach("not_found", f"{kind}_not_found", f"{facts.claim_id} has no {kind} {key!r}")
    if found == closed:
        return Breach("conflict", f"{kind}_{closed}", f"{kind} {key!r} of {facts.claim_id} is already {closed}")
    return None


def _filed(facts: ClaimFacts, item, actor: Actor) -> Breach | None:
    if (found := _new_item(facts, item, "disagreement", facts.disagreements)) is not None:
        return found
    if item.source_id is not None and item.source_id not in facts.sources:
        return Breach("not_found", "source_not_found", f"{facts.claim_id} has no source {item.source_id!r} to disagree with")
    return None


def _reviewed(facts: ClaimFacts, item, actor: Actor) -> Breach | None:
    """Who may review, a review id used once, of a revision the claim has reached. A review copied from a
    registry page is the page's word: who it says wrote it may review, and its revision is the page's."""
    imported = getattr(item, "imported_from", None) is not None
    reviewer = item.written_by if imported else actor
    refusal = review_refusal(facts.drafted_by, reviewer) if facts.drafted_by is not None and reviewer is not None else None
    if refusal is not None:
        return Breach("forbidden", *refusal)
    if (found := _new_item(facts, item, "review", facts.reviews)) is not None:
        return found
    if not imported and (why := revision_refusal(item.revision, facts.revision)) is not None:
        return Breach("invalid", "revision_not_found", f"{facts.claim_id}: {why}")
    kind = getattr(item, "reviewer_kind", None)  # a command's is decided from its actor, after these rules
    if kind is not None and reviewer is not None and kind != reviewer_kind(reviewer):
        return Breach(
            "invalid", "reviewer_kind", f"a review by {reviewer.id!r} ({reviewer.kind.value}) has reviewer_kind {reviewer_kind(reviewer)!r}, not {kind!r}"
        )
    return None


def reviewer_kind(reviewer: Actor) -> str:
    """The kind of review an actor's review is: a person's, or an AI model's."""
    return "person" if reviewer.kind.value == "person" else "ai"


def _superseded(facts: ClaimFacts, item, actor: Actor) -> Breach | None:
    if item.superseded_by == facts.claim_id:
        return Breach("invalid", "superseded_by_itself", f"{facts.claim_id} cannot supersede itself")
    return None


def _unrelated(facts: ClaimFacts, item, actor: Actor) -> Breach | None:
    if item.related_key not in facts.related:
        return Breach("not_found", "relation_not_found", f"{facts.claim_id} is not related to {item.related_key}")
    return None


_RULES: dict[str, Callable[[ClaimFacts, object, Actor], Breach | None]] = {
    "ClaimSuperseded": _superseded,
    "SourceAttached": lambda facts, item, actor: _new_item(facts, item, "source", facts.sources),
    "SourceCorrected": lambda facts, item, actor: _open_item(facts, item, "source", facts.sources, "withdrawn"),
    "SourceWithdrawn": lambda facts, item, actor: _open_item(facts, item, "source", facts.sources, "withdrawn"),
    "DisagreementFiled": _filed,
    "DisagreementAnswered": lambda facts, item, actor: _open_item(facts, item, "disagreement", facts.disagreements, "resolved"),
    "DisagreementResolved": lambda facts, item, actor: _open_item(facts, item, "disagreement", facts.disagreements, "resolved"),
    "ReviewRecorded": _reviewed,
    "ReviewWithdrawn": lambda facts, item, actor: _open_item(facts, item, "review", facts.reviews, "withdrawn"),
    "ClaimsUnrelated": _unrelated,
}


# What each event type changes, looked up by its ``type``: a bulk ingest folds every event it decides, and
# matching the event against one class after another cost more than the rest of the fold.
def _drafted(facts: ClaimFacts, event) -> None:
    facts.drafted, facts.revision = True, max(facts.revision, 1)
    facts.drafted_by = facts.drafted_by or event.actor


def _revised(facts: ClaimFacts, event) -> None:
    facts.revision += 1


def _closed(lifecycle: str) -> Callable[[ClaimFacts, object], None]:
    def close(facts: ClaimFacts, event) -> None:
        facts.lifecycle = lifecycle
    return close


def _marked(kind: str, state: str) -> Callable[[ClaimFacts, object], None]:
    """An item of ``kind`` the event names is now in ``state`` (withdrawn, resolved)."""
    def mark(facts: ClaimFacts, event) -> None:
        items = getattr(facts, f"{kind}s")
        key = getattr(event, f"{kind}_id")
        if key in items:
            items[key] = state
    return mark


_FOLDS: dict[str, Callable[[ClaimFacts, object], None]] = {
    "ClaimDrafted": _drafted,
    "ClaimRevised": _revised,
    "ClaimRetracted": _closed("retracted"),
    "ClaimSuperseded": _closed("superseded"),
    "SourceAttached": lambda facts, event: facts.sources.setdefault(event.source_id, "active"),
    "SourceWithdrawn": _marked("source", "withdrawn"),
    "DisagreementFiled": lambda facts, event: facts.disagreements.setdefault(event.disagreement_id, "open"),
    "DisagreementResolved": _marked("disagreement", "resolved"),
    "ReviewRecorded": lambda facts, event: facts.reviews.setdefault(event.review_id, "active"),
    "ReviewWithdrawn": _marked("review", "withdrawn"),
    "ClaimsRelated": lambda facts, event: facts.related.add(event.related_key),
    "ClaimsUnrelated": lambda facts, event: facts.related.discard(event.related_key),
}
