"""The counts of identical lines kept for evicted claims come back as they were left, for those claims only."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from services.ingest.bulk_copies import EvictedCopies

HASHES = st.integers(min_value=-(2**63), max_value=2**63 - 1)  # ``hash()`` of bytes, either sign


@given(st.dictionaries(st.text(min_size=1, max_size=12), st.dictionaries(HASHES, st.integers(1, 10**6), max_size=5), max_size=8))
def test_counts_kept_at_eviction_come_back_for_the_claims_evicted(evicted: dict[str, dict[int, int]]):
    copies = EvictedCopies()
    try:
        copies.keep((claim_id, Counter(counts)) for claim_id, counts in evicted.items())
        back = copies.take([*evicted, "never-evicted"])
        assert back == {claim_id: Counter(counts) for claim_id, counts in evicted.items() if counts}
    finally:
        copies.close()


def test_an_eviction_after_a_return_replaces_what_was_kept():
    copies = EvictedCopies()
    copies.keep([("CLM-0001", Counter({7: 1}))])
    copies.keep([("CLM-0001", Counter({7: 2, -9: 1}))])
    assert copies.take(["CLM-0001"]) == {"CLM-0001": Counter({7: 2, -9: 1})}
    copies.close()
    assert copies.take(["CLM-0001"]) == {}
