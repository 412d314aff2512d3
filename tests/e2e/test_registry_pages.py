"""Two registry pages of the tests' own (``tests/pages/``), entered with ``claimlog ingest PAGE.txt`` into a fresh
``claimlog up``, come through whole: every field in the JSON page, on the HTML page as a reader's Chromium shows
it, in ``claimlog show``, and as text equal to the file; and that text, entered into a second fresh registry,
comes back byte for byte."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from services.ingest.page_format import INVITATION, UNREVIEWED_NOTE, RegistryPage, parse_page
from tests.e2e.test_browser import open_page, text_of
from tests.e2e.test_up import free_port, wait_for_page
from tests.waiting import until_sync

PAGES = sorted((Path(__file__).parents[1] / "pages").glob("CLM-*.txt"))
WORDS = {"validates": "Validated", "supports": "Supported", "contradicts": "Contradicted", "qualifies": "Qualified",
         "mentions": "Mentioned"}


@dataclass
class Registry:
    """A running ``claimlog up`` of its own directory, and the ``claimlog`` command beside it."""

    url: str
    cwd: Path
    env: dict[str, str]

    def claimlog(self, *args: str, columns: int = 80) -> str:
        result = subprocess.run([sys.executable, "-m", "services.cli", *args], cwd=self.cwd,
                                env={**self.env, "COLUMNS": str(columns)}, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout

    def ingest(self, path: Path) -> None:
        """Enters a page, and waits until its page shows everything the file holds."""
        self.claimlog("ingest", str(path))
        page = parse_page(path.read_text(encoding="utf-8"), path.name)
        until_sync(lambda: self._whole(page), timeout=30, what=f"{page.claim_id} projected whole", every=0.1)

    def _whole(self, page: RegistryPage) -> bool:
        response = httpx.get(f"{self.url}/claims/{page.claim_id}", timeout=15)
        return response.status_code == 200 and (
            len(response.json()["sources"]), len(response.json()["related"])) == (len(page.sources), len(page.related))

    def page(self, claim_id: str) -> dict:
        return httpx.get(f"{self.url}/claims/{claim_id}", timeout=15).json()

    def text(self, claim_id: str) -> bytes:
        response = httpx.get(f"{self.url}/claims/{claim_id}/text", timeout=15)
        assert response.status_code == 200, response.text
        return response.content


@contextmanager
def fresh_registry(cwd: Path) -> Iterator[Registry]:
    """``claimlog up`` with nothing in it (no sample pages), until the block ends."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAIMLOG_")}
    process = subprocess.Popen([sys.executable, "-m", "services.cli", "up", "--port", str(port)],
                               cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for_page(f"{url}/health", process)  # the log, the database and the projector ready
        yield Registry(url, cwd, env)
    finally:
        process.terminate()
        output, _ = process.communicate(timeout=30)
    assert process.returncode == 0, output


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    with fresh_registry(tmp_path_factory.mktemp("registry")) as running:
        for path in PAGES:
            running.ingest(path)
        yield running


@pytest.fixture(params=PAGES, ids=lambda path: path.stem)
def page_file(request: pytest.FixtureRequest) -> Path:
    return request.param


def written(path: Path) -> RegistryPage:
    return parse_page(path.read_text(encoding="utf-8"), path.name)


def test_the_fixture_pages_hold_what_a_registry_page_can(page_file: Path):
    """Several sources of several relations (one cut short), several related claims with several labels."""
    page = written(page_file)
    assert len(page.sources) >= 5 and len({s.relation for s in page.sources}) >= 4
    assert any(s.truncated for s in page.sources)
    assert len({r.review_label for r in page.related}) == 3 and len(page.related) == 5
    assert len(page.statement) > 500 and all(len(r.statement) > 150 for r in page.related)


def test_the_json_page_holds_every_field_of_the_file(registry: Registry, page_file: Path):
    page, shown = written(page_file), registry.page(written(page_file).claim_id)
    assert (shown["claim_id"], shown["slug"], shown["revision"]) == (page.claim_id, page.slug, 1)
    assert (shown["statement"], shown["capability"], shown["observed_on"]) == (
        page.statement, page.capability, page.observed_on)
    assert [(s["relation"], s["measured"], s["breadth"], s["truncated"], s["state"], s["imported_from"])
            for s in shown["sources"]] == [
        (s.relation, s.measured, s.breadth, s.truncated, "active", page_file.name) for s in page.sources]
    assert all(s["brought"]["by"]["id"] == "claimlog-ingest" and not s["brought"].get("written_by")
               for s in shown["sources"])
    by_relation = {relation: n for relation, n in shown["counts"]["sources_by_relation"].items() if n}
    assert by_relation == dict(Counter(s.relation for s in page.sources))
    assert [(r["statement"], r["capability"], r["review_label"]) for r in shown["related"]] == [
        (r.statement, r.capability, r.review_label) for r in page.related]
    notes = shown["notes"]
    assert (notes["drafted_confidence"], notes["falsifier_as_drafted"]) == (page.drafted_confidence, page.falsifier)
    assert notes["drafted_by"]["kind"] == "model" and notes["drafted"]["imported_from"] == page_file.name
    assert shown["status"]["unreviewed_model_draft"] and not shown["status"]["counts_toward_scorecard"]
    assert (shown["disagreements"], shown["reviews"]) == ([], [])


def test_a_related_claim_in_the_registry_links_to_its_page_with_its_label_beside_its_state_now(registry: Registry):
    """Each fixture page relates the other by its statement: the label stays as written, the page now beside it."""
    first, second = (written(path) for path in PAGES)
    [to_second] = [r for r in registry.page(first.claim_id)["related"] if r["statement"] == second.statement]
    assert (to_second["claim_id"], to_second["review_label"], to_second["review_state_now"]) == (
        second.claim_id, "reviewed by a person", "unreviewed")
    assert to_second["label_disagrees"]
    [to_first] = [r for r in registry.page(second.claim_id)["related"] if r["statement"] == first.statement]
    assert (to_first["claim_id"], to_first["review_label"], to_first["label_disagrees"]) == (
        first.claim_id, "unreviewed", False)


def test_the_text_of_each_page_is_its_file(registry: Registry, page_file: Path):
    assert registry.text(written(page_file).claim_id) == page_file.read_bytes()


def test_a_reader_sees_every_source_with_its_relation_and_every_related_claim_with_its_label(
    registry: Registry, browser: WebDriver, page_file: Path
):
    page = written(page_file)
    open_page(browser, f"{registry.url}/pages/claims/{page.claim_id}")
    assert text_of(browser, "h1") == page.statement
    assert text_of(browser, ".capability") == page.capability
    assert text_of(browser, ".observed-on") == page.observed_on
    sources = [item.text for item in browser.find_elements(By.CSS_SELECTOR, "#sources li.source")]
    assert len(sources) == len(page.sources)
    for seen, source in zip(sources, page.sources, strict=True):
        assert seen.startswith(f"{WORDS[source.relation]} by: {source.measured}\n")
        label = "Measured" if source.breadth.startswith("Measured ") else "Measured:"
        assert f"\n{label} {source.breadth.removeprefix('Measured ')}" in seen
        assert seen.count("[truncated]") == int(source.truncated)
        assert f"Who brought it is not stated on {page_file.name} · imported by claimlog-ingest (service)" in seen
    related = [item.text for item in browser.find_elements(By.CSS_SELECTOR, "#related li.related")]
    assert len(related) == len(page.related)
    for seen, claim in zip(related, page.related, strict=True):
        statement, meta = seen.split("\n")[:2]
        assert statement == claim.statement
        assert meta.endswith(f"{claim.capability} · {claim.review_label}") or (
            f"{claim.capability} · {claim.review_label} · its page now: " in meta)
    notes = text_of(browser, "#notes")
    assert f"Drafted by an unnamed model; imported by claimlog-ingest (service) from {page_file.name}" in notes
    assert UNREVIEWED_NOTE in notes
    assert f"Drafted confidence: {page.drafted_confidence}." in notes
    assert f"Falsifier as drafted: {page.falsifier}" in notes
    assert INVITATION in text_of(browser, "#disagree")


def test_claimlog_show_prints_every_field_of_the_page(registry: Registry, page_file: Path):
    page = written(page_file)
    shown = registry.claimlog("show", page.claim_id, columns=20_000)  # no statement wrapped inside a table cell
    lines = [line.strip(" │┃|") for line in shown.splitlines()]
    assert page.statement in shown and f"capability: {page.capability}" in shown
    assert f"observed on: {page.observed_on}" in shown
    assert f"falsifier as drafted: {page.falsifier}" in shown
    assert f"drafted confidence: {page.drafted_confidence}" in shown
    for source in page.sources:
        [row] = [line for line in lines if source.measured in line]
        assert f" {source.relation} " in row
    for claim in page.related:
        [row] = [line for line in lines if claim.statement in line]
        assert claim.capability in row and claim.review_label in row


def test_the_text_entered_into_a_second_fresh_registry_comes_back_byte_for_byte(
    registry: Registry, tmp_path: Path
):
    moved = tmp_path / "moved"
    moved.mkdir()
    for path in PAGES:
        (moved / path.name).write_bytes(registry.text(written(path).claim_id))
    (tmp_path / "second").mkdir()
    with fresh_registry(tmp_path / "second") as second:
        for path in PAGES:
            second.ingest(moved / path.name)
        for path in PAGES:
            assert second.text(written(path).claim_id) == path.read_bytes()
