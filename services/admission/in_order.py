"""A claim's stored messages (or the whole log's) admitted in log order: each message's own verdict
(``verdicts.py``), then what only the order tells: a repeat of an event id its actor's events on its claim
admitted before (projections/repeats.py), and an event against the rules the command side applies, judged
from the claim's earlier admitted events (events/rules.py: a review of a revision the claim has not reached,
by its drafter or by a service; an act on a retracted claim; a withdrawal of a source it does not have).

Both need the claim's earlier admitted events: a reader that starts past a claim's first event gives what
they left (``folded``: the event ids, with where; ``facts``: the claim's facts, e.g. of a page snapshot)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from events.rules import ClaimFacts, event_breach
from projections.repeats import Key, Repeats, repeat_reason
from services.admission.verdicts import Admitted, Gate, Refused, Verdict

RULE_REASON_PREFIX = "against the rules:"  # how a refusal by the rules starts (a replay's records are told by it)


class InOrder:
    """Admits stored messages fed in log order. ``folded``: the event ids admitted before the first
    message fed (a snapshot's), with where; ``facts``: the facts of claims whose earlier events are not
    fed (a snapshot's claim)."""

    def __init__(self, gate: Gate, *, folded: Mapping[Key, int] | None = None, facts: Mapping[str, ClaimFacts] | None = None) -> None:
        self.gate = gate
        self._repeats = Repeats(folded)
        self._facts: dict[str, ClaimFacts] = dict(facts or {})

    def admit(self, stored) -> Verdict:
        """The verdict on the next ``StoredEvent`` in log order."""
        verdict = self.gate.stored(stored)
        return self.follows(verdict) if isinstance(verdict, Admitted) else verdict

    def follows(self, admitted: Admitted) -> Verdict:
        """An event the gate admitted on its own, judged against those admitted before it."""
        event, seq = admitted.event, admitted.seq
        first = self._repeats.earlier(event, seq)
        if first is not None:
            return Refused(seq, admitted.subject, admitted.stored_at, repeat_reason(event.event_id, first), event, "repeat")
        facts = self._facts.get(event.claim_id)
        if facts is None:
            facts = self._facts[event.claim_id] = ClaimFacts(event.claim_id)
        verdict = within_rules(facts, admitted)
        if verdict is admitted:  # refused, it is no act of its actor: its id stays free, as the write side sees it
            self._repeats.first_seq(event, seq)
            facts.fold(event)
        return verdict

    def verdicts(self, stored: Iterable) -> Iterator[Verdict]:
        """The verdict on each message, in order."""
        for item in stored:
            yield self.admit(item)


def within_rules(facts: ClaimFacts, admitted: Admitted) -> Verdict:
    """``admitted`` itself when its event keeps the rules on a claim with ``facts`` (its earlier admitted
    events); else refused, with the rule it breaks in the words the command side refuses a command with."""
    broken = event_breach(facts, admitted.event)
    if broken is None:
        return admitted
    reason = f"{RULE_REASON_PREFIX} {broken.message}"
    return Refused(admitted.seq, admitted.subject, admitted.stored_at, reason, admitted.event, "rule")


def admitted_only(gate: Gate, stored: Iterable, **state) -> Iterator[Admitted]:
    """The admitted events of ``stored`` (in log order), the refused left out."""
    for verdict in InOrder(gate, **state).verdicts(stored):
        if isinstance(verdict, Admitted):
            yield verdict
