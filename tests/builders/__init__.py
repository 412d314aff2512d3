"""Concise builders for events in tests: sensible defaults, every field overridable."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from events import Actor, Event, new_event_id
from events.claim import ClaimDrafted, ClaimRetracted, ClaimRevised
from events.disagreement import DisagreementAnswered, DisagreementFiled, DisagreementResolved
from events.relation import ClaimsRelated
from events.review import ReviewRecorded, ReviewWithdrawn
from events.source import SourceAttached, SourceCorrected, SourceWithdrawn

MODEL = Actor(id="drafter", kind="model", model="test-model-1")
PERSON = Actor(id="ada", kind="person")
BOT = Actor(id="source-bot", kind="service")


def _envelope(claim_id: str, actor: Actor, extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "event_id": new_event_id(),
        "claim_id": claim_id,
        "occurred_at": datetime(2026, 11, 30, 12, 0, tzinfo=UTC),
        "actor": actor,
        **extra,
    }


def drafted(claim_id: str, actor: Actor = MODEL, **extra: Any) -> ClaimDrafted:
    fields = {
        "slug": f"claim-{claim_id.lower()}",
        "statement": f"Statement of {claim_id}.",
        "capability": "Planning a sequence of actions before acting",
        "observed_on": "A small benchmark.",
        "drafted_confidence": "low",
        "falsifier": "A replication that finds no effect.",
    }
    return ClaimDrafted(**_envelope(claim_id, actor, {**fields, **extra}))


def revised(claim_id: str, actor: Actor = PERSON, **extra: Any) -> ClaimRevised:
    return ClaimRevised(**_envelope(claim_id, actor, extra or {"statement": "A sharper statement."}))


def retracted(claim_id: str, actor: Actor = PERSON, **extra: Any) -> ClaimRetracted:
    return ClaimRetracted(**_envelope(claim_id, actor, {"reason": "The paper was withdrawn.", **extra}))


def attached(claim_id: str, source_id: str = "s1", relation: str = "validates", actor: Actor = BOT, **extra: Any) -> SourceAttached:
    fields = {"source_id": source_id, "relation": relation, "measured": f"Measured {source_id}.", **extra}
    return SourceAttached(**_envelope(claim_id, actor, fields))


def corrected(claim_id: str, source_id: str = "s1", actor: Actor = PERSON, **extra: Any) -> SourceCorrected:
    return SourceCorrected(**_envelope(claim_id, actor, {"source_id": source_id, **(extra or {"measured": "Fixed."})}))


def withdrawn(claim_id: str, source_id: str = "s1", actor: Actor = PERSON, **extra: Any) -> SourceWithdrawn:
    return SourceWithdrawn(**_envelope(claim_id, actor, {"source_id": source_id, "reason": "Misread table.", **extra}))


def filed(claim_id: str, disagreement_id: str = "d1", actor: Actor = PERSON, **extra: Any) -> DisagreementFiled:
    fields = {"disagreement_id": disagreement_id, "argument": "The baseline is untuned.", **extra}
    return DisagreementFiled(**_envelope(claim_id, actor, fields))


def answered(claim_id: str, disagreement_id: str = "d1", actor: Actor = MODEL, **extra: Any) -> DisagreementAnswered:
    fields = {"disagreement_id": disagreement_id, "answer": "It was tuned.", **extra}
    return DisagreementAnswered(**_envelope(claim_id, actor, fields))


def resolved(claim_id: str, disagreement_id: str = "d1", outcome: str = "upheld", actor: Actor = PERSON) -> DisagreementResolved:
    return DisagreementResolved(**_envelope(claim_id, actor, {"disagreement_id": disagreement_id, "outcome": outcome}))


def reviewed(claim_id: str, review_id: str = "r1", kind: str = "person", actor: Actor = PERSON, **extra: Any) -> ReviewRecorded:
    fields = {"review_id": review_id, "reviewer_kind": kind, "verdict": "sound", "confidence": "medium", "revision": 1}
    return ReviewRecorded(**_envelope(claim_id, actor, {**fields, **extra}))


def review_withdrawn(claim_id: str, review_id: str = "r1", actor: Actor = PERSON) -> ReviewWithdrawn:
    return ReviewWithdrawn(**_envelope(claim_id, actor, {"review_id": review_id, "reason": "Reviewed the wrong claim."}))


def related(claim_id: str, actor: Actor = MODEL, **extra: Any) -> ClaimsRelated:
    return ClaimsRelated(**_envelope(claim_id, actor, extra or {"statement": "Another claim.", "capability": "X"}))


def history(claim_id: str) -> list[Event]:
    """A claim's life with every kind of change: withdrawals, corrections, disagreements and reviews."""
    return [
        drafted(claim_id),
        attached(claim_id, "s1", "validates"),
        attached(claim_id, "s2", "contradicts"),
        attached(claim_id, "s3", "supports"),
        corrected(claim_id, "s3"),
        withdrawn(claim_id, "s2"),
        filed(claim_id, "d1"),
        answered(claim_id, "d1"),
        resolved(claim_id, "d1", "rejected"),
        filed(claim_id, "d2"),
        reviewed(claim_id, "r1", "ai", actor=Actor(id="reviewer-bot", kind="model", model="judge-2")),
        reviewed(claim_id, "r2", "person"),
        revised(claim_id, falsifier="A new falsifier."),
        related(claim_id),
    ]
