"""The benchmarks' results file: a run appends its figures with where and when; the docs' tables are rendered from it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench import results


def test_a_figure_is_appended_with_date_commit_machine_command_and_peer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = tmp_path / "results.csv"
    monkeypatch.setattr("sys.argv", ["/anywhere/bench/replay.py", "--postgres", "postgresql://bench:secret@db:5432/x", "--sync", "2m"])
    monkeypatch.setenv("BENCH_MACHINE", "test machine")
    results.record("rebuild into PostgreSQL", 24649.4, unit="events/s", peer=1541.2, path=path)
    results.record("as-of page from its snapshot p99", 12.25, unit="ms", path=path)
    rows = results.read(path)
    assert path.read_text().splitlines()[0] == ",".join(results.FIELDS)
    assert [(row["figure"], row["value"], row["unit"], row["peer"]) for row in rows] == [
        ("rebuild into PostgreSQL", "24649", "events/s", "1541"),
        ("as-of page from its snapshot p99", "12.25", "ms", ""),
    ]
    row = rows[0]
    assert row["bench"] == "bench/replay.py --postgres postgresql://... --sync 2m"  # no host, no password
    assert row["machine"] == "test machine"
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", row["date"])
    assert re.fullmatch(r"[0-9a-f]{7}(\+changes)?|unknown", row["commit"])


def test_the_latest_figure_of_each_command_and_figure_wins_grouped_by_bench():
    def row(bench: str, figure: str, value: str) -> dict[str, str]:
        return {"bench": bench, "figure": figure, "value": value}

    rows = [
        row("bench/replay.py --sync 2m", "rebuild into SQLite", "1"),
        row("bench/backlog.py", "projector, one process", "2"),
        row("bench/replay.py", "rebuild into SQLite", "3"),
        row("bench/replay.py --sync 2m", "rebuild into SQLite", "4"),
    ]
    assert [r["value"] for r in results.latest(rows)] == ["2", "4", "3"]


def test_the_tables_of_the_benchmarks_page_are_rendered_from_the_results_file():
    targets = results.targets(results.read())
    assert set(targets) == {str(results.ROOT / "docs" / "benchmarks.md")}
    for path, text in targets.items():
        assert Path(path).read_text() == text, f"{path} is stale: run python bench/results.py --write"


def test_the_benchmarks_page_shows_each_headline_figure_once_with_its_date_commit_and_machine():
    text = (results.ROOT / "docs" / "benchmarks.md").read_text()
    table = text[text.index("<!-- results:headline begin -->"):text.index("<!-- results:headline end -->")]
    for row in results.headline(results.read()):
        cells = f"| `{row['bench']}` | {row['figure']} | "
        assert table.count(cells) == 1, cells
        line = next(line for line in table.splitlines() if line.startswith(cells))
        assert f"| {row['date']} | `{row['commit']}` | {row['machine']} |" in line, line


def test_the_readme_holds_no_dated_figures_and_links_to_them():
    readme = (results.ROOT / "README.md").read_text()
    assert "results:" not in readme
    assert not re.search(r"\| 20\d\d-\d\d-\d\d \|", readme), "a dated row of figures in the README"
    assert "(docs/benchmarks.md#headline-figures)" in readme


def test_every_headline_figure_is_in_the_results_file():
    keys = {(row["bench"], row["figure"]) for row in results.read()}
    assert set(results.HEADLINE) <= keys
    assert len(results.headline(results.read())) == len(results.HEADLINE)


def test_a_document_without_markers_is_refused():
    with pytest.raises(ValueError, match="results:headline"):
        results.rendered("no markers here", "headline", "| table |")
