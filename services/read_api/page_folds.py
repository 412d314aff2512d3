"""How a claim page with many disagreements stays readable: open ones first and always shown, resolved ones
after them, folded under one line with their exact count once there are more than ``RESOLVED_SHOWN``.

A claim with 150 disagreements was a page of about 12,000 px, its open disagreements (the ones a reader can
still take part in) lost among the settled ones. The fold is a native ``<details>``: it opens without
JavaScript, browsers open it for a link to a disagreement inside it and for find-in-page, and the JSON page
keeps every disagreement in filing order whatever the HTML shows.
"""

from __future__ import annotations

from dataclasses import dataclass

from projections.page_model import DisagreementView

RESOLVED_SHOWN = 10  # resolved disagreements a page shows unfolded; past it, all of them are folded
OUTCOMES = ("upheld", "rejected", "withdrawn")


@dataclass(frozen=True, slots=True)
class DisagreementSections:
    """A page's disagreements as the HTML page lays them out, each list in filing order."""

    open: list[DisagreementView]
    resolved: list[DisagreementView]
    folded: bool
    by_outcome: dict[str, int]  # resolved ones by outcome, in OUTCOMES order, outcomes with none left out


def disagreement_sections(disagreements: list[DisagreementView]) -> DisagreementSections:
    """Open disagreements first; resolved ones after, folded when there are more than ``RESOLVED_SHOWN``."""
    open_ = [d for d in disagreements if d.state != "resolved"]
    resolved = [d for d in disagreements if d.state == "resolved"]
    counted = {outcome: sum(1 for d in resolved if d.outcome == outcome) for outcome in OUTCOMES}
    return DisagreementSections(
        open=open_,
        resolved=resolved,
        folded=len(resolved) > RESOLVED_SHOWN,
        by_outcome={outcome: n for outcome, n in counted.items() if n},
    )
