"""The decision records: each a file of docs/decisions/ named NNNN-title.md, each listed in the folder's index."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DECISIONS = ROOT / "docs" / "decisions"
RECORD = re.compile(r"\d{4}-[a-z0-9-]+\.md")


def records() -> list[str]:
    return sorted(path.name for path in DECISIONS.glob("*.md") if path.name != "README.md")


def test_every_record_is_named_by_its_number_and_title_and_numbers_are_not_reused():
    names = records()
    assert names, "no decision records"
    assert [name for name in names if not RECORD.fullmatch(name)] == []
    numbers = [name[:4] for name in names]
    assert len(numbers) == len(set(numbers)), names


def test_every_record_is_listed_in_the_index():
    index = (DECISIONS / "README.md").read_text()
    listed = set(re.findall(r"\]\((\d{4}-[a-z0-9-]+\.md)\)", index))
    assert [name for name in records() if name not in listed] == []

