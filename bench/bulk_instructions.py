"""Instructions a line costs on the bulk ingest path, counted by callgrind: the same on every run.

    python bench/bulk_instructions.py [--claims 2000 6000] [--per-claim 5] [--capacity N] [--against ../other-checkout]

Speed on these shared two-core machines moves by a fifth from one run to the next; an instruction
count does not. Two files of ``--claims`` claims are written, and each runs through the bulk path
(``BulkIngest`` into a fresh embedded nats-server, ``sync always``) under ``valgrind --tool=callgrind``,
the python process only; the difference of the two counts over the difference of the lines is one
line's cost, with start-up and imports cancelled out. ``--capacity`` runs with a claim cache that small,
so that claims are evicted (and read again) as in a file of more claims than the default holds. ``--against`` counts another checkout (an
earlier commit in a git worktree, say) on the same files in the same run: the peer.

callgrind runs a CPU without SHA extensions, so the three digests of a line count several times what
they cost on the machine; the comparison holds, the absolute figure overstates them.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


def count_path(repo: Path, path: Path, capacity: int) -> None:
    """Run the bulk path of the checkout ``repo`` on ``path`` (the process callgrind watches)."""
    sys.path.insert(0, str(repo))
    from events import Actor
    from services.log import ClaimLog, StreamSpec, connect
    from services.runtime.embedded import EmbeddedNats
    from services.runtime.from_settings import run

    try:
        from services.ingest.bulk import BulkIngest
        from services.ingest.bulk_lines import iter_commands
        from services.ingest.cli import freeze_survivors

        options = {"after_batch": freeze_survivors}  # as ``claimlog ingest`` runs it
    except ImportError:  # a checkout from before the bulk path moved into ingest, which froze inside it
        from services.commands.bulk import BulkIngest
        from services.commands.bulk_lines import iter_commands

        options = {}
    if capacity:
        options["capacity"] = capacity

    async def ingest(url: str) -> None:
        nc = await connect(url)
        log = ClaimLog(nc, StreamSpec("CLAIMS"))
        await log.ensure()
        actor = Actor(id="ingest-bot", kind="model", model="pipeline-2")
        report = await BulkIngest(log, actor, **options).run(iter_commands(path))
        await nc.drain()
        if report.rejected:
            raise SystemExit(f"{len(report.rejected)} lines rejected: {report.rejected[:3]}")

    with tempfile.TemporaryDirectory() as home, EmbeddedNats(Path(home), sync="always") as server:
        run(ingest(server.url_for("admin")))


def instructions(repo: Path, files: list[Path], out: Path, *, capacity: int = 0) -> list[int]:
    """callgrind's instruction count of the bulk path on each file, the runs side by side."""
    runs = []
    for number, path in enumerate(files):
        target = out / f"{repo.name}.{number}.callgrind"
        command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={target}",
                   sys.executable, __file__, "--count", str(repo), str(path), str(capacity)]
        runs.append((subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True), target))
    counts = []
    for process, target in runs:
        _, errors = process.communicate()
        if process.returncode != 0:
            raise SystemExit(f"callgrind run failed ({process.returncode}):\n{errors[-2000:]}")
        summary = re.search(r"^summary: (\d+)", target.read_text(), re.MULTILINE)
        if summary is None:
            raise SystemExit(f"{target} holds no summary line")
        counts.append(int(summary.group(1)))
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--claims", type=int, nargs=2, default=[2000, 6000], metavar=("FEW", "MORE"))
    parser.add_argument("--per-claim", type=int, default=5)
    parser.add_argument("--capacity", type=int, default=0, help="the claim cache's size (0: the default)")
    parser.add_argument("--against", type=Path, help="another checkout, counted on the same files (the peer)")
    parser.add_argument("--count", nargs=3, metavar=("REPO", "FILE", "CAPACITY"), help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.count:
        count_path(Path(options.count[0]), Path(options.count[1]), int(options.count[2]))
        return

    sys.path.insert(0, str(HERE))
    from rich.console import Console
    from rich.table import Table

    from bench.results import record
    from tests.builders.workload import write_commands

    few, more = options.claims
    lines = (more - few) * options.per_claim
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch)
        files = [out / f"{claims}.jsonl" for claims in (few, more)]
        for path, claims in zip(files, (few, more), strict=True):
            write_commands(path, claims=claims, per_claim=options.per_claim)
        repos = [HERE, *([options.against.resolve()] if options.against else [])]
        per_line = {}
        for repo in repos:
            small, large = instructions(repo, files, out, capacity=options.capacity)
            per_line[repo] = (large - small) / lines
    peer = per_line.get(options.against.resolve()) if options.against else None
    cache = f", a claim cache of {options.capacity:,}" if options.capacity else ""
    table = Table(title=f"Bulk path: instructions a line (callgrind), {few:,} and {more:,} claims x {options.per_claim}{cache}")
    table.add_column("checkout")
    table.add_column("instructions a line", justify="right")
    table.add_column("vs --against", justify="right")
    for repo, value in per_line.items():
        table.add_row(str(repo), f"{value:,.0f}", "" if peer is None else f"{value / peer:.2f}")
    Console().print(table)
    against = ""
    if options.against:
        commit = subprocess.run(["git", "-C", str(options.against), "rev-parse", "--short=7", "HEAD"], capture_output=True, text=True)
        against = f"; peer: the checkout at {commit.stdout.strip() or options.against}"
    record("bulk path instructions a line", per_line[HERE], unit="instructions", peer=peer, note=f"callgrind{cache}{against}")


if __name__ == "__main__":
    main()
