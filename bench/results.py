"""The benchmarks' results file: every run appends its figures to bench/results.csv, with the date, the
commit, the machine and the command line, next to the peer's figure from the same run. The tables of
docs/benchmarks.md (the headline figures, and every latest figure) are rendered from that file.

    python bench/results.py            # print the table of the latest figures
    python bench/results.py --write    # rewrite the tables between the markers in docs/benchmarks.md

Set BENCH_MACHINE to name the machine (default: its core count and CPU model).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import os
import platform
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results.csv"
FIELDS = ("date", "commit", "machine", "bench", "figure", "value", "unit", "peer", "note")
# The headline rows of docs/benchmarks.md, in order: (the bench's command line, the figure).
HEADLINE = (
    ("bench/latency.py", "publish to visible p99"),
    ("bench/backlog.py --sync 2m", "projector, one process"),
    ("bench/fold.py", "fold from memory"),
    ("bench/commands.py", "command p99"),
    ("bench/bulk.py --sync 2m", "ingest"),
    ("bench/read_api.py", "claim page p99 (SQLite)"),
    ("bench/read_api.py", "search p99 (SQLite)"),
    ("bench/replay.py --sync 2m", "rebuild into SQLite"),
    ("bench/replay.py --sync 2m", "rebuild into PostgreSQL"),
    ("bench/replay.py --sync 2m", "as-of page from its snapshot p99"),
)
# Files whose changes do not make a run's commit "+changes": the results and the tables rendered from them.
RENDERED = ("bench/results.csv", "docs/benchmarks.md")


def record(figure: str, value: float, *, unit: str, peer: float | None = None, note: str = "", path: Path = RESULTS) -> None:
    """Append one figure of this run (today, this commit, this machine, this command line) to the results file."""
    row = {
        "date": datetime.now(UTC).date().isoformat(), "commit": this_commit(), "machine": this_machine(),
        "bench": this_command(), "figure": figure, "value": _number(value), "unit": unit,
        "peer": "" if peer is None else _number(peer), "note": note,
    }
    new = not path.exists() or path.stat().st_size == 0
    with path.open("a", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=FIELDS, lineterminator="\n")
        if new:
            writer.writeheader()
        writer.writerow(row)


def this_command(argv: list[str] | None = None) -> str:
    """The bench's command line as run, with database URLs shortened to their scheme (no host, no password)."""
    argv = sys.argv if argv is None else argv
    words = [f"bench/{Path(argv[0]).name}", *argv[1:]]
    return re.sub(r"\b([a-z][a-z0-9+]*)://\S+", r"\1://...", " ".join(words))


def this_commit() -> str:
    """The short commit of the code measured, with "+changes" when tracked files differ from it."""
    try:
        commit = _git("rev-parse", "--short=7", "HEAD")
        changed = _git("status", "--porcelain", "--untracked-files=no", "--", ".", *(f":!{name}" for name in RENDERED))
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("+changes" if changed else "")


def this_machine() -> str:
    """BENCH_MACHINE, or the core count and the CPU model."""
    if name := os.environ.get("BENCH_MACHINE"):
        return name
    model = platform.processor() or platform.machine()
    with contextlib.suppress(OSError, StopIteration):
        model = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name"))
    return f"{os.cpu_count()}-core {model}"


def read(path: Path = RESULTS) -> list[dict[str, str]]:
    """Every recorded figure, oldest first (the file is appended to in time order)."""
    with path.open(newline="") as file:
        return list(csv.DictReader(file))


def latest(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """The newest row of each (bench, figure): grouped by bench script, each in the order it first appears."""
    newest: dict[tuple[str, str], dict[str, str]] = {}
    for row in rows:
        newest[(row["bench"], row["figure"])] = row  # a key assigned again keeps its first place
    return sorted(newest.values(), key=lambda row: row["bench"].split()[0])


def headline(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """The newest row of each headline figure."""
    newest = {(row["bench"], row["figure"]): row for row in latest(rows)}
    return [newest[key] for key in HEADLINE if key in newest]


def markdown(rows: list[dict[str, str]], *, notes: bool = True) -> str:
    """A markdown table of figures: command, figure, claimlog, the peer in the same run, when, where."""
    head = ["bench command", "figure", "claimlog", "peer, same run", "date", "commit", "machine"] + (["note"] if notes else [])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        peer = _shown(row["peer"], row["unit"]) if row["peer"] else ""
        cells = [f"`{row['bench']}`", row["figure"], _shown(row["value"], row["unit"]), peer, row["date"], f"`{row['commit']}`", row["machine"]]
        lines.append("| " + " | ".join(cells + ([row["note"]] if notes else [])) + " |")
    return "\n".join(lines)


def rendered(text: str, name: str, table: str) -> str:
    """``text`` with the part between its ``results:name`` markers replaced by ``table``."""
    begin, end = f"<!-- results:{name} begin -->", f"<!-- results:{name} end -->"
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), flags=re.S)
    if not pattern.search(text):
        raise ValueError(f"no {begin} ... {end} markers")
    return pattern.sub(lambda _: f"{begin}\n{table}\n{end}", text)


def targets(rows: list[dict[str, str]]) -> dict[str, str]:
    """Each rendered file's text as ``--write`` leaves it: docs/benchmarks.md, its headline and latest tables."""
    benchmarks = ROOT / "docs" / "benchmarks.md"
    text = rendered(benchmarks.read_text(), "headline", markdown(headline(rows), notes=False))
    return {str(benchmarks): rendered(text, "latest", markdown(latest(rows)))}


def _number(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.2f}".rstrip("0").rstrip(".")


def _shown(value: str, unit: str) -> str:
    number = float(value)
    text = f"{number:,.0f}" if abs(number) >= 100 else f"{number:,.2f}" if abs(number) < 1 else f"{number:,.1f}"
    return f"{text} {unit}"


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help="rewrite the tables in docs/benchmarks.md")
    args = parser.parse_args()
    rows = read()
    if not args.write:
        print(markdown(latest(rows)))
        return
    for path, text in targets(rows).items():
        Path(path).write_text(text)
        print(f"wrote {Path(path).relative_to(ROOT)}")


if __name__ == "__main__":
    main()
