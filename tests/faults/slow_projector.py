"""``claimlog projector`` with every batch held up first: a slow consumer, for test_slow_consumer.py.

FAULTS_SLOW="<seconds per batch>:<for how many seconds>". The sleep is on the projector's event loop,
as a slow synchronous projection would be: nothing is read from the socket meanwhile.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from services.cli import main  # noqa: E402
from services.projector.runner import Projector  # noqa: E402


def slowed(per_batch: float, duration: float):
    original = Projector._commit
    until = time.monotonic() + duration

    def commit(self, *batch):
        if time.monotonic() < until:
            time.sleep(per_batch)
        return original(self, *batch)

    return commit


if __name__ == "__main__":
    per_batch, duration = (float(part) for part in os.environ["FAULTS_SLOW"].split(":"))
    Projector._commit = slowed(per_batch, duration)
    main()
