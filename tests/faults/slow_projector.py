"""``claimlog projector`` with every batch held up first: a slow consumer, for test_slow_consumer.py.

FAULTS_SLOW="<seconds per batch>:<for how many seconds>". The sleep is in the writer's thread, where
a slow projection's statements run: the next batch waits for it, and the server's deliveries pile up.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from services.cli import main  # noqa: E402
from services.projector.writer import CheckpointedWriter  # noqa: E402


def slowed(per_batch: float, duration: float):
    original = CheckpointedWriter._write
    until = time.monotonic() + duration

    def commit(self, *batch, **how):
        if time.monotonic() < until:
            time.sleep(per_batch)
        return original(self, *batch, **how)

    return commit


if __name__ == "__main__":
    per_batch, duration = (float(part) for part in os.environ["FAULTS_SLOW"].split(":"))
    CheckpointedWriter._write = slowed(per_batch, duration)
    main()
