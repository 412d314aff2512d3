"""The scorecard's rules: which claims count, and where each stands. One pure function each, versioned.

Written out in docs/scorecard.md. Change a rule only with a new ``RULES_VERSION`` (the claim-pages
projection's version follows it, so the read models are rebuilt with the new rule).

Standing reads the claim's active evidence (withdrawn sources never count):

- ``validated``: at least one source validates it and none contradicts it;
- ``supported``: sources support it (none validates) and none contradicts it;
- ``contested``: some sources validate or support it and some contradict it;
- ``refuted``: sources contradict it and none validates or supports it;
- ``untested``: no source validates, supports or contradicts it (qualifying and mentioning sources
  alone do not move standing).

A claim counts toward the scorecard when it is active (not retracted or superseded) and is not an
unreviewed model draft: a claim drafted by a model with no active review is visible, but moves no
standing and is counted apart, as "left out".

Who may review (``review_refusal`` in events/review.py; the command side refuses such a review, and the
log's gate one a direct producer wrote: events/rules.py): a person or an AI model, never a service; never
the actor that drafted the claim; never a model of the same name as the drafting model. So a model draft counts once a person,
or an AI model other than the drafting one, has reviewed it.
"""

from __future__ import annotations

RULES_VERSION = 2
STANDINGS: tuple[str, ...] = ("validated", "supported", "contested", "refuted", "untested")


def standing(by_relation: dict[str, int]) -> str:
    """Where a claim stands, from its active sources counted by relation."""
    backing = by_relation.get("validates", 0) + by_relation.get("supports", 0)
    against = by_relation.get("contradicts", 0)
    if backing and against:
        return "contested"
    if against:
        return "refuted"
    if by_relation.get("validates", 0):
        return "validated"
    return "supported" if backing else "untested"


def counts_toward_scorecard(lifecycle: str, unreviewed_model_draft: bool) -> bool:
    """Whether a claim counts toward the scorecard (and so moves its technique's standing)."""
    return lifecycle == "active" and not unreviewed_model_draft
