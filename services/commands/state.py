"""A claim's state as the command side needs it, folded from the claim's events in the log.

Smaller than the claim page: only what decisions look at (does it exist, is it open, which
sources, disagreements, reviews and relations it has, which revision it is at), plus where its
history ends, so an append can say which sequence it expects and which hash it chains to.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from events import Actor, Event, UnknownEventError
from events.claim import ClaimDrafted, ClaimRetracted, ClaimRevised, ClaimSuperseded
from events.disagreement import DisagreementResolved
from events.review import ReviewWithdrawn
from events.source import SourceWithdrawn


class Written(NamedTuple):
    """An event of this claim already in the log: where, and of which type."""

    seq: int
    event: Event  # whose it is and what it says: an event id names one writer's one command

    @property
    def type(self) -> str:
        return self.event.type


@dataclass(slots=True)
class ClaimState:
    """Everything a decision about one claim may look at."""

    claim_id: str
    drafted: bool = False
    drafted_by: Actor | None = None  # who drafted it (the first draft, if a producer wrote two)
    lifecycle: str = "active"  # active, retracted, superseded
    revision: int = 0
    sources: dict[str, str] = field(default_factory=dict)  # source id -> active / withdrawn
    disagreements: dict[str, str] = field(default_factory=dict)  # id -> open / resolved
    reviews: dict[str, str] = field(default_factory=dict)  # id -> active / withdrawn
    related: set[str] = field(default_factory=set)  # related keys
    written: dict[str, Written] = field(default_factory=dict)  # event id -> where it is
    head_seq: int = 0  # the claim's last sequence in the log (0: no events yet)
    head_hash: str | None = None  # SHA-256 of its last stored bytes

    def take(self, stored) -> None:
        """Take one stored event (``StoredEvent``) into account."""
        try:
            event = stored.event
        except UnknownEventError:
            # Published around the command API and unreadable: the projector records it; here it
            # only moves the head, so the next append still expects the right sequence.
            self.head_seq, self.head_hash = stored.seq, stored.hash
            return
        self.evolve(event, stored.seq, stored.hash)

    def evolve(self, event: Event, seq: int, stored_hash: str) -> None:
        """Take one stored event into account (events arrive in log order)."""
        self.head_seq, self.head_hash = seq, stored_hash
        event_id = event.event_id
        if event_id in self.written:
            return  # an event id already folded is never folded twice (the projection skips it too)
        self.written[event_id] = _new_written(Written, (seq, event))
        fold = _FOLDS.get(event.type)
        if fold is not None:
            fold(self, event)


# What each event type changes, looked up by its ``type``: a bulk ingest folds every event it decides,
# and matching the event against one class after another cost more than the rest of the fold.
def _drafted(state: ClaimState, event: ClaimDrafted) -> None:
    state.drafted, state.revision = True, max(state.revision, 1)
    state.drafted_by = state.drafted_by or event.actor


def _revised(state: ClaimState, event: ClaimRevised) -> None:
    state.revision += 1


def _retracted(state: ClaimState, event: ClaimRetracted) -> None:
    state.lifecycle = "retracted"


def _superseded(state: ClaimState, event: ClaimSuperseded) -> None:
    state.lifecycle = "superseded"


def _source_withdrawn(state: ClaimState, event: SourceWithdrawn) -> None:
    if event.source_id in state.sources:
        state.sources[event.source_id] = "withdrawn"


def _disagreement_resolved(state: ClaimState, event: DisagreementResolved) -> None:
    if event.disagreement_id in state.disagreements:
        state.disagreements[event.disagreement_id] = "resolved"


def _review_withdrawn(state: ClaimState, event: ReviewWithdrawn) -> None:
    if event.review_id in state.reviews:
        state.reviews[event.review_id] = "withdrawn"


_FOLDS: dict[str, Callable[[ClaimState, Event], None]] = {
    "ClaimDrafted": _drafted,
    "SourceAttached": lambda state, event: state.sources.setdefault(event.source_id, "active"),
    "ClaimRevised": _revised,
    "ClaimRetracted": _retracted,
    "ClaimSuperseded": _superseded,
    "SourceWithdrawn": _source_withdrawn,
    "DisagreementFiled": lambda state, event: state.disagreements.setdefault(event.disagreement_id, "open"),
    "DisagreementResolved": _disagreement_resolved,
    "ReviewRecorded": lambda state, event: state.reviews.setdefault(event.review_id, "active"),
    "ReviewWithdrawn": _review_withdrawn,
    "ClaimsRelated": lambda state, event: state.related.add(event.related_key),
    "ClaimsUnrelated": lambda state, event: state.related.discard(event.related_key),
}
_new_written = tuple.__new__  # ``Written(seq, event)`` without the Python frame a named tuple's constructor adds


def claim_state(claim_id: str, stored: Iterable) -> ClaimState:
    """The state of a claim from its stored events (``StoredEvent``: seq, event, hash), in log order."""
    state = ClaimState(claim_id)
    for item in stored:
        state.take(item)
    return state
