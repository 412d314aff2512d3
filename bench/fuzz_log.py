"""An end-to-end fuzz run of the log: a direct producer's signed events and mutations of them, folded live.

    python bench/fuzz_log.py [--events 5000] [--seed 1]

A direct producer (its own Ed25519 key in the key registry, the writer's NATS credential) appends the
events of a few dozen claims with the project's signed append, after a few unsigned events stored before
`claimlog actors key require`. Between them it publishes mutations (tests/builders/fuzz_mutations.py): unsigned,
mis-signed, signed for another actor, subject and body naming other claims, truncated and garbage bytes,
wrong types, unknown types, huge fields, wrong ``prev_hash``, replays and duplicates; and mutations of the
headers (tests/builders/fuzz_headers.py): ``Claimlog-Stored-At``, the signature headers, ``Nats-Msg-Id``. A projector folds the
log while it is written. The run then checks that the projector reached the log's head, that exactly the
unattributable or unreadable events and the repeats of folded ones are recorded unreadable, that ``verify``
names exactly those and the chain breaks, that the tables equal a clean replay, and that they equal the projection of a second log
holding only the events that fold (same bytes, signatures and store times; sequences mapped), and that
every other reader (as-of pages, history, the write side's state, the past scorecard, an export imported)
equals the same reader of that log (tests/builders/fuzz_readers.py).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from bench.common import arguments, progress  # noqa: E402
from tests.builders.fuzz_headers import HEADER_KINDS  # noqa: E402
from tests.builders.fuzz_mutations import KINDS  # noqa: E402
from tests.builders.fuzz_run import Outcome, fuzz  # noqa: E402


def summary(outcome: Outcome) -> Table:
    """Per kind: messages sent, stored, deduplicated by the server, and recorded unreadable."""
    published = outcome.published
    table = Table(title=f"fuzz run: log head {outcome.head}, {outcome.seconds:.1f} s")
    for column in ("kind", "sent", "stored", "deduplicated", "unreadable", "folded"):
        table.add_column(column, justify="left" if column == "kind" else "right")
    for kind in ("legacy", "valid", *KINDS, *HEADER_KINDS):
        seqs = [seq for seq, k in published.kinds.items() if k == kind]
        unreadable = sum(seq in outcome.unreadable for seq in seqs)
        table.add_row(kind, str(published.sent[kind]), str(len(seqs)), str(published.deduplicated[kind]), str(unreadable), str(len(seqs) - unreadable))
    return table


def main() -> int:
    parser = arguments(__doc__)
    parser.add_argument("--events", type=int, default=5000, help="messages to publish, valid and mutated (default 5000)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the run's choices (default 1)")
    options = parser.parse_args()
    logging.disable(logging.ERROR)  # the projector logs every unreadable event: the summary counts them
    console = Console()
    with tempfile.TemporaryDirectory(prefix="claimlog-fuzz-") as folder, progress() as bar:
        task = bar.add_task("publish", total=options.events, rate="")

        def sent(count: int) -> None:
            speed = bar.tasks[0].speed
            bar.update(task, completed=count, rate=f"{speed:,.0f} messages/s" if speed else "")

        outcome = asyncio.run(fuzz(options.events, options.seed, Path(folder), sync=options.sync, on_sent=sent))
    console.print(summary(outcome))
    for problem in outcome.problems:
        console.print(f"[red]✗ {problem}")
    if not outcome.problems:
        console.print("[green]✓ the projector reached the head; exactly the bad events are unreadable and named by verify; "
                      "the tables equal a clean replay and a projection of the valid events alone")
    return 1 if outcome.problems else 0


if __name__ == "__main__":
    sys.exit(main())
