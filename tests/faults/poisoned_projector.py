"""``claimlog projector`` with a poison event: the claim-page fold raises on one claim's source withdrawals,
as a bug would, for test_poison_event.py.

FAULTS_POISON_CLAIM="<claim id>". Every other claim's withdrawals are folded as usual.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from events.source import SourceWithdrawn  # noqa: E402
from projections import claim_page  # noqa: E402
from services.cli import main  # noqa: E402

POISON_ERROR = "injected poison: the withdrawal handler fails on"


def poisoned(claim_id: str):
    handler = claim_page.HANDLERS[SourceWithdrawn]

    def withdrawn(page, event, stamp):
        if event.claim_id == claim_id:
            raise ValueError(f"{POISON_ERROR} {claim_id}")
        handler(page, event, stamp)

    return withdrawn


if __name__ == "__main__":
    claim_page.HANDLERS[SourceWithdrawn] = poisoned(os.environ["FAULTS_POISON_CLAIM"])
    main()
