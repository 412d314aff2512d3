"""The registry's past, read from the log: any claim page (and the scorecard) as of a sequence or a time,
and a claim's history with what each revision changed.

Everything here folds the claim's stored events with the projector's own code
(``projections.claim_page.apply`` and ``derive``), so the past is computed, never stored.
"""
