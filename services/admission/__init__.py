"""The log's admission: the one gate every reader of the log admits a stored message through.

A stored message is admitted (decoded; its store time readable; its subject naming the claim and type
its body names; signed by a key that may speak for its actor, or unsigned where the registry allows it;
not a repeat of an event id its actor has admitted on its claim; within the rules ``decide`` applies that
the claim's own earlier events can judge: events/rules.py) or refused with a reason. ``verdicts.py``
decides one message and ``in_order.py`` a claim's messages in log order; both are pure (no NATS, no database), so a reader that knows only the bytes, headers and sequences (an
HTTP auditor) reaches the same verdicts. ``keys.py`` reads the key registry a gate checks against.

Above ``log/`` and ``identity/`` (the key registry); below every reader of the log.
"""

from services.admission.in_order import RULE_REASON_PREFIX, InOrder, admitted_only, within_rules
from services.admission.keys import gate_for
from services.admission.verdicts import Admitted, Gate, Refused, RegistryFact, Verdict

__all__ = [
    "RULE_REASON_PREFIX", "Admitted", "Gate", "InOrder", "Refused", "RegistryFact", "Verdict", "admitted_only", "gate_for",
    "within_rules",
]
