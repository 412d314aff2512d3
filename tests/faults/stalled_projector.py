"""``claimlog projector`` that stops itself (SIGSTOP) inside a batch's transaction, for test_projector_workers.py.

FAULTS_STALL="<trigger file>": once the file exists, the next batch inserts its event ids into
``folded_events`` and the process stops there, its session idle in that transaction with the rows
locked, after writing ``<trigger file>.stopped``. FAULTS_SLOW as in slow_projector.py, to keep a
backlog going until then.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from services.cli import main  # noqa: E402
from services.projector import writer  # noqa: E402
from services.projector.writer import CheckpointedWriter  # noqa: E402
from tests.faults.slow_projector import slowed  # noqa: E402


def stalling(trigger: Path):
    original = writer.without_repeats

    def without_repeats(conn, records, subjects, **options):
        folded = original(conn, records, subjects, **options)
        if records and trigger.exists() and not trigger.with_suffix(".stopped").exists():
            trigger.with_suffix(".stopped").write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGSTOP)
        return folded

    return without_repeats


if __name__ == "__main__":
    writer.without_repeats = stalling(Path(os.environ["FAULTS_STALL"]))
    if "FAULTS_SLOW" in os.environ:
        per_batch, duration = (float(part) for part in os.environ["FAULTS_SLOW"].split(":"))
        CheckpointedWriter._write = slowed(per_batch, duration)
    main()
