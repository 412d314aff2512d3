"""A claim's state as the command side needs it, folded from the claim's events in the log.

Smaller than the claim page: only what decisions look at (does it exist, is it open, which
sources, disagreements, reviews and relations it has, which revision it is at), plus where its
history ends, so an append can say which sequence it expects and which hash it chains to.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from events import Event
from events.rules import ClaimFacts
from services.admission import Admitted, Gate, within_rules


class Written(NamedTuple):
    """An event of this claim already in the log: where, and of which type."""

    seq: int
    event: Event  # whose it is and what it says: an event id names one command of its writer

    @property
    def type(self) -> str:
        return self.event.type


@dataclass(slots=True)
class ClaimState(ClaimFacts):
    """Everything a decision about one claim may look at: the facts the rules read (events/rules.py), and
    where its history ends."""

    written: dict[tuple[str, str], Written] = field(default_factory=dict)  # (actor id, event id) -> where it is
    head_seq: int = 0  # the claim's last sequence in the log (0: no events yet)
    head_hash: str | None = None  # SHA-256 of its last stored bytes

    def take(self, stored, gate: Gate) -> None:
        """Take one stored event (``StoredEvent``) into account, as the gate judges it (services/admission/:
        the key registry's gate, ``gate_for``; there is no default, which would judge without the registry)."""
        verdict = gate.stored(stored)
        if isinstance(verdict, Admitted) and (verdict.event.actor.id, verdict.event.event_id) not in self.written:
            verdict = within_rules(self, verdict)  # a repeat is no act of its own: ``evolve`` passes over it
        if not isinstance(verdict, Admitted):
            # Refused (unreadable, forged, its store time unreadable, against the rules): no reader folds it,
            # so it decides nothing; it only moves the head, so the next append still expects the right sequence.
            self.head_seq, self.head_hash = stored.seq, stored.hash
            return
        self.evolve(verdict.event, stored.seq, stored.hash)

    def evolve(self, event: Event, seq: int, stored_hash: str) -> None:
        """Take one stored event into account (events arrive in log order)."""
        self.head_seq, self.head_hash = seq, stored_hash
        key = (event.actor.id, event.event_id)
        if key in self.written:
            return  # an actor's event id already folded is never folded twice (the projection skips it too)
        self.written[key] = _new_written(Written, (seq, event))
        self.fold(event)


_new_written = tuple.__new__  # ``Written(seq, event)`` without the Python frame a named tuple's constructor adds


def claim_state(claim_id: str, stored: Iterable, gate: Gate) -> ClaimState:
    """The state of a claim from its stored events (``StoredEvent``: seq, data, hash), in log order, each
    admitted by ``gate`` or only moving the head."""
    state = ClaimState(claim_id)
    for item in stored:
        state.take(item, gate)
    return state
