"""Every relative link of the README and the reference leads somewhere: a file that exists, and a heading
of it when the link names one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The decision records too (their index is checked by tests/unit/test_decisions.py: it lists every record).
DOCUMENTS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "docs" / "decisions").glob("[0-9]*.md"), *ROOT.glob("CONTRIBUTING.md")])
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)|<([^>\s]+)>")


def prose(markdown: str) -> str:
    """The text links can live in: fenced blocks and inline code left out."""
    return re.sub(r"`[^`\n]*`", "", re.sub(r"^```.*?^```", "", markdown, flags=re.S | re.M))


def anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives the headings: lower case, punctuation dropped, spaces as hyphens,
    a repeated heading numbered."""
    seen: dict[str, int] = {}
    found = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", re.sub(r"^```.*?^```", "", markdown, flags=re.S | re.M), flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        found.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return found


def broken_links(document: Path, *, root: Path = ROOT) -> list[str]:
    """Each relative link of ``document`` whose file or heading does not exist, with why (paths from ``root``)."""
    problems = []
    for match in LINK.finditer(prose(document.read_text())):
        target = match.group(1) or match.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: are not checked here
            continue
        path, _, anchor = target.partition("#")
        file = (document.parent / path).resolve() if path else document
        if not file.exists():
            problems.append(f"{document.relative_to(root)}: {target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file.read_text()):
            problems.append(f"{document.relative_to(root)}: {target}: no heading #{anchor} in {file.relative_to(root)}")
    return problems


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_relative_link_resolves(document: Path):
    assert broken_links(document) == []


def test_the_reference_is_linked_from_the_readme_and_the_check_reads_its_links():
    readme = prose((ROOT / "README.md").read_text())
    linked = {(ROOT / (m.group(1) or "").partition("#")[0]).resolve() for m in LINK.finditer(readme) if m.group(1)}
    assert {path.resolve() for path in (ROOT / "docs").glob("*.md")} <= linked


def test_a_missing_file_and_a_missing_heading_are_reported(tmp_path: Path):
    (tmp_path / "other.md").write_text("# The `claimlog verify` command (here)\n\n## Two\n\n## Two\n")
    document = tmp_path / "page.md"
    document.write_text(
        "[ok](other.md#the-claimlog-verify-command-here) [twice](other.md#two-1) [self](#a-heading)\n"
        "[gone](missing.md) [no heading](other.md#three) `[code](missing.md)` <https://example.org>\n\n"
        "# A heading\n\n```\n[fenced](missing.md)\n```\n"
    )
    assert broken_links(document, root=tmp_path) == [
        "page.md: missing.md: no such file",
        "page.md: other.md#three: no heading #three in other.md",
    ]
