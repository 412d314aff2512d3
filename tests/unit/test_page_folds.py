"""How the HTML claim page lays out many disagreements: open ones first, resolved ones folded past a threshold."""

from __future__ import annotations

from datetime import UTC, datetime

from projections.base import Record
from projections.claim_page import fold
from services.read_api.page_folds import RESOLVED_SHOWN, disagreement_sections
from tests.builders import drafted, filed, resolved

CLAIM = "CLM-0001"
OUTCOMES = ("upheld", "rejected", "withdrawn")


def _page(disagreements: int, resolved_ones: int):
    """A page with ``disagreements`` filed, the first ``resolved_ones`` of them resolved by turns of outcome."""
    events = [drafted(CLAIM)] + [filed(CLAIM, f"d{n}") for n in range(disagreements)]
    events += [resolved(CLAIM, f"d{n}", OUTCOMES[n % 3]) for n in range(resolved_ones)]
    return fold(Record(seq, datetime(2026, 11, 30, tzinfo=UTC), e) for seq, e in enumerate(events, start=1))


def test_open_disagreements_come_first_and_each_list_keeps_filing_order():
    page = _page(6, 3)
    sections = disagreement_sections(page.disagreements)
    assert [d.disagreement_id for d in sections.open] == ["d3", "d4", "d5"]
    assert [d.disagreement_id for d in sections.resolved] == ["d0", "d1", "d2"]
    assert not sections.folded


def test_resolved_disagreements_fold_only_past_the_threshold_with_their_count_by_outcome():
    at_threshold = disagreement_sections(_page(RESOLVED_SHOWN + 5, RESOLVED_SHOWN).disagreements)
    assert not at_threshold.folded
    past = disagreement_sections(_page(RESOLVED_SHOWN + 5, RESOLVED_SHOWN + 1).disagreements)
    assert past.folded
    assert len(past.resolved) == RESOLVED_SHOWN + 1 == sum(past.by_outcome.values())
    assert past.by_outcome == {"upheld": 4, "rejected": 4, "withdrawn": 3}


def test_an_outcome_no_disagreement_had_is_left_out_of_the_count():
    page = _page(12, 12)
    for each in page.disagreements:
        each.outcome = "rejected"
    assert disagreement_sections(page.disagreements).by_outcome == {"rejected": 12}
