"""The pages for people, as a reader sees them: ``claimlog up --sample`` in a subprocess, read in headless
Chromium (Debian's, driven by its own chromedriver through Selenium), with JavaScript turned off."""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from tests.e2e.browsing import chromium
from tests.e2e.test_up import free_port, wait_for_page
from tests.waiting import until_sync

SAMPLE_CLAIMS = ("CLM-0338", "CLM-0501", "CLM-0631")
REDOC_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"


@dataclass
class Claimlog:
    """A running ``claimlog up --sample``: where it answers, and the directory it runs in."""

    url: str
    cwd: Path
    env: dict[str, str]

    def page_json(self, claim_id: str, after: int = 0) -> dict:
        response = httpx.get(f"{self.url}/claims/{claim_id}", params={"after": after} if after else None, timeout=15)
        assert response.status_code == 200, response.text
        return response.json()

    def token_for(self, name: str) -> str:
        """A new person actor's bearer token, from the command line as an operator gets it."""
        result = subprocess.run(
            [sys.executable, "-m", "services.cli", "actors", "add", name, "--kind", "person"],
            cwd=self.cwd, env=self.env, capture_output=True, text=True, timeout=60, check=True,
        )
        return result.stdout.strip()

    def send(self, token: str, command: str, **body) -> int:
        """Carries out a command through the command API; the log sequence of its last event."""
        response = httpx.post(
            f"{self.url}/commands/{command}", json=body, headers={"Authorization": f"Bearer {token}"}, timeout=15
        )
        assert response.status_code == 201, response.text
        return response.json()["last_seq"]


@pytest.fixture(scope="module")
def claimlog(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Claimlog]:
    cwd = tmp_path_factory.mktemp("claimlog-up")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAIMLOG_")}
    process = subprocess.Popen(
        [sys.executable, "-m", "services.cli", "up", "--sample", "--port", str(port)],
        cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        for claim_id in SAMPLE_CLAIMS:
            wait_for_page(f"{url}/claims/{claim_id}", process)
        yield Claimlog(url, cwd, env)
    finally:
        process.terminate()
        output, _ = process.communicate(timeout=30)
    assert process.returncode == 0, output


def text_of(browser: WebDriver, css: str) -> str:
    return browser.find_element(By.CSS_SELECTOR, css).text


def blocked(browser: WebDriver) -> list[str]:
    """What the page's Content-Security-Policy blocked since last asked, as the console said it."""
    return [entry["message"] for entry in browser.get_log("browser") if "Content Security Policy" in entry["message"]]


def open_page(browser: WebDriver, url: str) -> None:
    browser.get(url)
    # The one script a page may carry is the app's own live.js (it keeps an open page up to date).
    assert set(re.findall(r"<script[^>]*>", browser.page_source)) <= {'<script src="/static/live.js" defer="">'}
    assert not blocked(browser)


def test_a_reader_sees_the_claim_page_and_follows_a_related_claim(
    claimlog: Claimlog, browser: WebDriver, tmp_path: Path
):
    page = claimlog.page_json("CLM-0338")
    open_page(browser, f"{claimlog.url}/pages/claims/CLM-0338")
    browser.save_screenshot(str(tmp_path / "CLM-0338.png"))

    assert text_of(browser, "h1") == page["statement"]
    assert text_of(browser, ".capability") == "Carrying a chain of inference through to its conclusion"
    assert text_of(browser, ".observed-on") == page["observed_on"]
    assert "Unreviewed model draft" in text_of(browser, "#status")
    assert "does not count toward the scorecard" in text_of(browser, "#status")
    source = text_of(browser, "#sources li.source")
    assert source.startswith("Validated by: F1 on seven QA benchmarks")
    assert "Who brought it is not stated on CLM-0338.txt · imported by claimlog-ingest (service) on 20" in source
    assert "registry-drafter" not in source
    notes = text_of(browser, "#notes")
    assert "Drafted confidence: low." in notes
    assert f"Falsifier as drafted: {page['notes']['falsifier_as_drafted']}" in notes
    invitation = text_of(browser, "#disagree")
    assert "Disagreeing is the most useful thing you can do here." in invitation
    assert "POST /commands/file_disagreement" in invitation

    related = browser.find_elements(By.CSS_SELECTOR, "#related li")
    assert len(related) == 5
    assert [link.get_attribute("href") for link in browser.find_elements(By.CSS_SELECTOR, "#related a")] == [
        f"{claimlog.url}/pages/claims/CLM-0501", f"{claimlog.url}/pages/claims/CLM-0631"
    ]
    browser.find_element(By.CSS_SELECTOR, '#related a[href="/pages/claims/CLM-0501"]').click()
    WebDriverWait(browser, 10).until(lambda b: b.current_url.endswith("/pages/claims/CLM-0501"))
    assert text_of(browser, "h1") == claimlog.page_json("CLM-0501")["statement"]
    assert "Drafted confidence: medium." in text_of(browser, "#notes")


def test_the_listing_links_to_every_sample_claim_and_filters_by_capability(claimlog: Claimlog, browser: WebDriver):
    open_page(browser, f"{claimlog.url}/")
    assert browser.current_url == f"{claimlog.url}/pages/claims"
    links = browser.find_elements(By.CSS_SELECTOR, "a.claim-link")
    assert [link.text for link in links] == list(SAMPLE_CLAIMS)

    browser.find_element(By.LINK_TEXT, "Getting more from several models than from one").click()
    WebDriverWait(browser, 10).until(lambda b: "capability=" in b.current_url)
    assert [link.text for link in browser.find_elements(By.CSS_SELECTOR, "a.claim-link")] == ["CLM-0631"]
    browser.find_element(By.LINK_TEXT, "CLM-0631").click()
    WebDriverWait(browser, 10).until(lambda b: b.current_url.endswith("/pages/claims/CLM-0631"))
    assert text_of(browser, "h1") == claimlog.page_json("CLM-0631")["statement"]

    open_page(browser, f"{claimlog.url}/pages/claims?limit=2")
    assert [link.text for link in browser.find_elements(By.CSS_SELECTOR, "a.claim-link")] == ["CLM-0338", "CLM-0501"]
    browser.find_element(By.CSS_SELECTOR, "a[rel=next]").click()
    WebDriverWait(browser, 10).until(lambda b: "cursor=" in b.current_url)
    assert [link.text for link in browser.find_elements(By.CSS_SELECTOR, "a.claim-link")] == ["CLM-0631"]
    assert not browser.find_elements(By.CSS_SELECTOR, "a[rel=next]")


def test_an_unknown_claim_gets_a_404_page(claimlog: Claimlog, browser: WebDriver):
    assert httpx.get(f"{claimlog.url}/pages/claims/CLM-9999", timeout=15).status_code == 404
    open_page(browser, f"{claimlog.url}/pages/claims/CLM-9999")
    assert text_of(browser, "h1") == "No such claim"
    assert "CLM-9999" in text_of(browser, "main")


def test_a_withdrawn_source_stays_struck_through_with_who_withdrew_it_and_why(
    claimlog: Claimlog, browser: WebDriver, tmp_path: Path
):
    source_id = claimlog.page_json("CLM-0338")["sources"][0]["source_id"]
    token = claimlog.token_for("grace")
    reason = "The ablation numbers were read off the wrong table <Table 3>."
    seq = claimlog.send(token, "withdraw_source", claim_id="CLM-0338", source_id=source_id, reason=reason)
    assert claimlog.page_json("CLM-0338", after=seq)["sources"][0]["state"] == "withdrawn"

    open_page(browser, f"{claimlog.url}/pages/claims/CLM-0338?after={seq}")
    source = browser.find_element(By.CSS_SELECTOR, f"#source-{source_id}")
    struck = source.find_element(By.TAG_NAME, "del")
    assert struck.text.startswith("Validated by: F1 on seven QA benchmarks")
    assert "line-through" in struck.value_of_css_property("text-decoration-line")
    assert "imported by claimlog-ingest (service)" in source.text
    assert "Withdrawn by grace (person) on 20" in source.text and f"UTC: {reason}" in source.text
    assert text_of(browser, "#withdrawn-count") == "1"
    browser.save_screenshot(str(tmp_path / "CLM-0338-withdrawn.png"))


def test_corrections_disagreements_reviews_and_a_revised_falsifier_show_with_who_did_them(
    claimlog: Claimlog, browser: WebDriver
):
    source_id = claimlog.page_json("CLM-0501")["sources"][0]["source_id"]
    token = claimlog.token_for("ada")
    ada = functools.partial(claimlog.send, token, claim_id="CLM-0501")
    ada("correct_source", source_id=source_id, citation="arXiv:2601.00001", reason="The paper has an id now.")
    ada("file_disagreement", disagreement_id="horizon", argument="Three environments cannot show a trend with horizon.")
    ada("answer_disagreement", disagreement_id="horizon", answer="GSM-Infinite varies the horizon within one environment.")
    ada("resolve_disagreement", disagreement_id="horizon", outcome="rejected", note="The within-environment trend holds.")
    ada("file_disagreement", disagreement_id="judge", argument="The LLM judge may leak the reference.", source_id=source_id)
    ada("record_review", review_id="r1", verdict="sound", confidence="medium", revision=1, summary="Checked the tables.")
    ada("record_review", review_id="r2", verdict="unsound", confidence="low", revision=1)
    ada("withdraw_review", review_id="r2", reason="Reviewed the wrong paper.")
    seq = ada("revise_claim", falsifier="Segment rewards trail sparse rewards at matched compute.", reason="Sharper.")

    open_page(browser, f"{claimlog.url}/pages/claims/CLM-0501?after={seq}")
    assert "Corrected by ada (person) on 20" in text_of(browser, f"#source-{source_id}")
    assert "citation now “arXiv:2601.00001”. Why: The paper has an id now." in text_of(browser, f"#source-{source_id}")
    rejected = text_of(browser, "#disagreement-horizon")
    assert "Filed by ada (person)" in rejected and "GSM-Infinite varies the horizon" in rejected
    assert "resolved\nRejected by ada (person)" in rejected or "resolved Rejected by ada (person)" in rejected
    assert "Answered by ada (person) on 20" in rejected and "UTC: GSM-Infinite varies the horizon" in rejected
    assert f"About source {source_id}" in text_of(browser, "#disagreement-judge")
    assert "1 open, 1 resolved" in text_of(browser, "#status")
    assert "1 by a person, 0 by AI" in text_of(browser, "#status")
    assert "reviewed by a person" in text_of(browser, "#status")
    assert "Unreviewed model draft" not in text_of(browser, "#status")
    reviews = browser.find_elements(By.CSS_SELECTOR, "#reviews li")
    assert reviews[0].text.startswith("sound, confidence medium, of revision 1: Checked the tables.")
    assert reviews[1].find_element(By.TAG_NAME, "del").text.startswith("unsound")
    assert "withdrawn Withdrawn by ada (person) on 20" in reviews[1].text and "UTC: Reviewed the wrong paper." in reviews[1].text
    notes = text_of(browser, "#notes")
    assert "Falsifier as drafted: On long-horizon tasks" in notes
    assert "Falsifier as it stands now: Segment rewards trail sparse rewards at matched compute." in notes


def test_a_reader_searches_the_listing_with_the_search_box(claimlog: Claimlog, browser: WebDriver):
    open_page(browser, f"{claimlog.url}/pages/claims")
    box = browser.find_element(By.CSS_SELECTOR, "form.filter input[name=q]")
    box.send_keys("frozen")
    box.submit()
    WebDriverWait(browser, 10).until(lambda b: "q=frozen" in b.current_url)
    assert [link.text for link in browser.find_elements(By.CSS_SELECTOR, "a.claim-link")] == ["CLM-0631"]
    assert text_of(browser, "#result-count") == "1 claim matches."
    assert browser.find_element(By.CSS_SELECTOR, "input[name=q]").get_attribute("value") == "frozen"

    browser.find_element(By.CSS_SELECTOR, "input[name=q]").clear()
    browser.find_element(By.CSS_SELECTOR, "input[name=q]").send_keys("--")
    browser.find_element(By.CSS_SELECTOR, "form.filter button[type=submit]").click()
    WebDriverWait(browser, 10).until(lambda b: "q=--" in b.current_url)
    assert "names no word to look for" in text_of(browser, "#problem")
    assert not browser.find_elements(By.CSS_SELECTOR, "a.claim-link")


def test_the_scorecard_page_charts_the_numbers_of_the_json_scorecard(claimlog: Claimlog, browser: WebDriver):
    # A person's review takes CLM-0631 out of the unreviewed model drafts: it counts, and a bar shows it.
    token = claimlog.token_for("barbara")
    seq = claimlog.send(token, "record_review", claim_id="CLM-0631", review_id="scorecard", verdict="sound",
                        confidence="medium", revision=1)
    card = httpx.get(f"{claimlog.url}/scorecard", params={"after": seq}, timeout=15).json()
    open_page(browser, f"{claimlog.url}/pages/claims?after={seq}")
    browser.find_element(By.LINK_TEXT, "Scorecard").click()
    WebDriverWait(browser, 10).until(lambda b: b.current_url.endswith("/pages/scorecard"))

    chart = browser.find_element(By.CSS_SELECTOR, "svg#scorecard-chart")
    assert chart.size["width"] > 300 and chart.size["height"] > 100
    assert "unreviewed model drafts left out" in chart.text and "validated" in chart.text
    bars = chart.find_elements(By.CSS_SELECTOR, "g.bar")
    assert [bar.get_attribute("data-label") for bar in bars] == [c["capability"] for c in card["capabilities"]]
    for bar, score in zip(bars, card["capabilities"], strict=True):
        drawn = {s.get_attribute("data-standing"): int(s.get_attribute("data-claims"))
                 for s in bar.find_elements(By.CSS_SELECTOR, "rect.segment")}
        left_out = score["unreviewed_model_drafts_left_out"]
        assert drawn == {k: v for k, v in {**score["by_standing"], "left-out": left_out}.items() if v}
        assert f"{score['claims_counted']} count" in bar.text
    assert sum(c["claims_counted"] for c in card["capabilities"]) >= 1

    rows = browser.find_elements(By.CSS_SELECTOR, "#scorecard-table tbody tr")
    for row, score in zip(rows, card["capabilities"], strict=True):
        cells = [cell.text for cell in row.find_elements(By.TAG_NAME, "td")]
        numbers = [*score["by_standing"].values(), score["claims_counted"], score["unreviewed_model_drafts_left_out"]]
        assert cells == [str(n) for n in numbers]
    assert "docs/scorecard.md" in text_of(browser, "#rules")
    browser.find_element(By.CSS_SELECTOR, "#scorecard-table a[href*='capability=Getting']").click()
    WebDriverWait(browser, 10).until(lambda b: "capability=" in b.current_url)
    assert [link.text for link in browser.find_elements(By.CSS_SELECTOR, "a.claim-link")] == ["CLM-0631"]


def test_the_pages_take_their_stylesheet_from_the_api_and_the_policy_blocks_nothing(claimlog: Claimlog, browser: WebDriver):
    open_page(browser, f"{claimlog.url}/pages/claims/CLM-0338")
    header = browser.find_element(By.CSS_SELECTOR, "header.site")
    assert header.value_of_css_property("border-bottom-style") == "solid"  # from /static/style.css
    assert browser.find_element(By.CSS_SELECTOR, ".draft").value_of_css_property("border-left-width") == "4px"


@pytest.mark.parametrize(("path", "rendered"), [("/docs", ".opblock"), ("/redoc", "[data-section-id]")])
def test_the_api_docs_run_from_files_the_api_serves_within_their_policy(claimlog: Claimlog, path: str, rendered: str):
    """Swagger UI and ReDoc as a reader's browser runs them: the API's operations listed, nothing fetched from
    elsewhere (every resource the page loaded is the API's), and nothing of their own blocked."""
    driver = chromium(javascript=True)
    try:
        driver.get(f"{claimlog.url}{path}")
        WebDriverWait(driver, 30).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, rendered)) > 5)
        assert "draft_claim" in driver.page_source or "Draft claim" in driver.page_source
        tried = driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
        assert any(url.endswith(".js") for url in tried), tried
        elsewhere = [url for url in tried if not url.startswith(claimlog.url)]
        refused = blocked(driver)
        # ReDoc's side bar asks its CDN for a logo (hidden when it fails): the policy refuses it, as anything else.
        assert elsewhere in ([], [REDOC_LOGO]), elsewhere
        assert all(any(url in message for message in refused) for url in elsewhere), refused
        assert not [message for message in refused if REDOC_LOGO not in message], refused
    finally:
        driver.quit()


def open_disagreements_shown(driver: WebDriver, claim_id: str) -> str:
    return driver.find_element(By.CSS_SELECTOR, f"tr#{claim_id} td.open-disagreements").text


def test_without_javascript_the_listing_shows_every_claim_with_its_counts_and_names_its_stream(
    claimlog: Claimlog, browser: WebDriver
):
    listed = httpx.get(f"{claimlog.url}/claims", params={"limit": 100}, timeout=15).json()["items"]
    open_page(browser, f"{claimlog.url}/pages/claims")
    rows = browser.find_elements(By.CSS_SELECTOR, "table.listing tbody tr")
    assert [row.get_attribute("id") for row in rows] == [claim["claim_id"] for claim in listed]
    for claim in listed:
        assert open_disagreements_shown(browser, claim["claim_id"]) == str(claim["disagreements_open"])
    assert browser.find_element(By.TAG_NAME, "body").get_attribute("data-live") == "/live"
    assert browser.find_element(By.TAG_NAME, "body").get_attribute("data-live-open") is None  # no script ran

    open_page(browser, f"{claimlog.url}/pages/claims?as_of_seq=1")  # a past listing never changes: no stream
    assert browser.find_element(By.TAG_NAME, "body").get_attribute("data-live") is None


def test_an_open_listing_shows_a_new_disagreement_in_its_count_with_javascript_on(claimlog: Claimlog, tmp_path: Path):
    """live.js on the listing: the registry's stream says a claim changed, and the listing's results are
    fetched again and swapped in; no reload, and the search box keeps what was typed into it."""
    token = claimlog.token_for("lovelace")
    driver = chromium(javascript=True)
    try:
        open_page(driver, f"{claimlog.url}/pages/claims")
        driver.execute_script("document.body.dataset.marker = 'same document'")
        driver.find_element(By.CSS_SELECTOR, "input[name=q]").send_keys("half typed")
        until_sync(lambda: driver.execute_script("return document.body.dataset.liveOpen") == "true", what="the live stream")
        before = int(open_disagreements_shown(driver, "CLM-0338"))
        seq = claimlog.send(token, "file_disagreement", claim_id="CLM-0338", disagreement_id="listing-live",
                            argument="Seven benchmarks share most of their questions' sources.")
        now = claimlog.page_json("CLM-0338", after=seq)["counts"]["disagreements_open"]
        assert now == before + 1
        # The row is replaced while it is read: an element gone stale is read again.
        WebDriverWait(driver, 10, poll_frequency=0.05, ignored_exceptions=[StaleElementReferenceException]).until(
            lambda d: open_disagreements_shown(d, "CLM-0338") == str(now),
            message=f"the listing did not show the new count: {driver.get_log('browser')}",
        )
        assert driver.execute_script("return document.body.dataset.marker") == "same document"  # not reloaded
        assert int(driver.execute_script("return document.body.dataset.shownSeq")) >= seq
        assert driver.find_element(By.CSS_SELECTOR, "input[name=q]").get_attribute("value") == "half typed"
        assert not blocked(driver)
        driver.save_screenshot(str(tmp_path / "listing-live.png"))
    finally:
        driver.quit()


def test_an_open_claim_page_shows_a_write_without_a_reload_with_javascript_on(claimlog: Claimlog, tmp_path: Path):
    """live.js: the page hears of the commit on its live stream and fetches itself again; no reload."""
    driver = chromium(javascript=True)
    try:
        driver.get(f"{claimlog.url}/pages/claims/CLM-0501")
        WebDriverWait(driver, 10).until(lambda d: d.execute_script("return document.readyState") == "complete")
        driver.execute_script("document.body.dataset.marker = 'same document'")
        until_sync(lambda: driver.execute_script("return document.body.dataset.liveOpen") == "true", what="the live stream")
        token = claimlog.token_for("hopper")
        argument = "The horizon effect is shown on synthetic tasks only."
        written = time.monotonic()
        seq = claimlog.send(token, "file_disagreement", claim_id="CLM-0501", disagreement_id="live-1", argument=argument)
        WebDriverWait(driver, 5, poll_frequency=0.05).until(
            lambda d: argument in (d.execute_script("return document.getElementById('disagreements').textContent") or ""),
            message=f"the page did not show the write: {driver.get_log('browser')}",
        )
        shown_after = time.monotonic() - written
        assert driver.execute_script("return document.body.dataset.marker") == "same document"  # not reloaded
        assert int(driver.execute_script("return document.body.dataset.shownSeq")) >= seq
        assert not blocked(driver)
        driver.save_screenshot(str(tmp_path / "CLM-0501-live.png"))
        print(f"the page showed the write {shown_after:.2f} s after it was acknowledged")  # how soon: bench/latency.py, not a timed test
    finally:
        driver.quit()


LONG_PAGE = "CLM-0777"
OUTCOME_WORDS = ("Upheld", "Rejected", "Withdrawn")


def _page_with_many_disagreements(claimlog: Claimlog, many: int) -> str:
    """A sample page's text under a new id and slug, with ``many`` disagreements: every other one answered, four
    of every five resolved (by turns upheld, rejected and withdrawn), the rest open."""
    text = httpx.get(f"{claimlog.url}/claims/CLM-0631/text", timeout=15).text
    lines = text.replace("CLM-0631", LONG_PAGE).splitlines(keepends=True)
    lines[0] = "a-claim-with-many-disagreements" + lines[0][lines[0].index(" "):]
    section = ["Disagreements\n"]
    for n in range(many):
        section.append(f"- Filed by alice (person): Objection number {n}: the ablation leaves out a baseline.\n")
        if n % 2 == 0:
            section.append(f"  Answered by reviewer-7 (model: judge model 2): An answer to objection {n}.\n")
        if n % 5:
            section.append(f"  {OUTCOME_WORDS[n % 3]} by carol (person).\n")
    invitation = next(at for at, line in enumerate(lines) if line.startswith("Disagreeing is the most useful"))
    return "".join(lines[:invitation] + section + lines[invitation:])


def _document_height(browser: WebDriver) -> float:
    """The laid-out height of the whole page, in CSS pixels (read by the driver: the page runs no script)."""
    return browser.find_element(By.TAG_NAME, "html").rect["height"]


def _long_page(claimlog: Claimlog, tmp_path: Path) -> dict:
    """``LONG_PAGE`` ingested (again: an import adds nothing the log holds) and shown whole: its JSON page."""
    (tmp_path / "PAGE.txt").write_text(_page_with_many_disagreements(claimlog, 150))
    subprocess.run(
        [sys.executable, "-m", "services.cli", "ingest", str(tmp_path / "PAGE.txt")],
        cwd=claimlog.cwd, env=claimlog.env, capture_output=True, text=True, timeout=120, check=True,
    )
    return until_sync(
        lambda: (found := httpx.get(f"{claimlog.url}/claims/{LONG_PAGE}", timeout=15)).status_code == 200
        and len(found.json()["disagreements"]) >= 150 and found.json()["counts"]["disagreements_resolved"] == 120
        and found.json(),
        timeout=60, what=f"{LONG_PAGE} with its 150 disagreements",
    )


def test_a_claim_with_many_disagreements_folds_the_resolved_ones_under_their_exact_count(
    claimlog: Claimlog, browser: WebDriver, tmp_path: Path
):
    page = _long_page(claimlog, tmp_path)
    assert len(page["disagreements"]) == 150
    counts = page["counts"]
    assert (counts["disagreements_open"], counts["disagreements_resolved"]) == (30, 120)

    open_page(browser, f"{claimlog.url}/pages/claims/{LONG_PAGE}")
    folded_height = _document_height(browser)
    browser.save_screenshot(str(tmp_path / "folded.png"))
    assert "30 open, 120 resolved" in text_of(browser, "#status")
    opened = browser.find_elements(By.CSS_SELECTOR, "#open-disagreements > li.disagreement.open")
    assert len(opened) == 30 and all(each.is_displayed() for each in opened)
    fold = browser.find_element(By.CSS_SELECTOR, "details#resolved-disagreements")
    assert fold.get_attribute("open") is None
    outcomes = {word.lower(): sum(1 for d in page["disagreements"] if d["outcome"] == word.lower()) for word in OUTCOME_WORDS}
    assert sum(outcomes.values()) == 120
    summary = ", ".join(f"{n} {outcome}" for outcome, n in outcomes.items())
    assert fold.find_element(By.TAG_NAME, "summary").text == f"120 resolved disagreements: {summary}"
    hidden = fold.find_elements(By.CSS_SELECTOR, "li.disagreement.resolved")
    assert len(hidden) == 120 and not any(each.is_displayed() for each in hidden)

    fold.find_element(By.TAG_NAME, "summary").click()  # a click opens it: no script needed
    until_sync(lambda: fold.get_attribute("open") is not None, what="the fold opening")
    unfolded_height = _document_height(browser)
    assert all(each.is_displayed() for each in hidden)
    print(f"{LONG_PAGE}: {folded_height:.0f} px folded, {unfolded_height:.0f} px unfolded")
    assert folded_height < 0.4 * unfolded_height, (folded_height, unfolded_height)


def test_a_fold_the_reader_opened_stays_open_when_the_page_shows_a_write(claimlog: Claimlog, tmp_path: Path):
    """live.js swaps in the page fetched again after a change: the resolved disagreements a reader unfolded
    stay unfolded, and the new disagreement shows among the open ones."""
    _long_page(claimlog, tmp_path)
    driver = chromium(javascript=True)
    try:
        driver.get(f"{claimlog.url}/pages/claims/{LONG_PAGE}")
        until_sync(lambda: driver.execute_script("return document.body.dataset.liveOpen") == "true", what="the live stream")
        fold = driver.find_element(By.CSS_SELECTOR, "details#resolved-disagreements")
        fold.find_element(By.TAG_NAME, "summary").click()
        until_sync(lambda: fold.get_attribute("open") is not None, what="the fold opening")

        argument = "The fold should not close while I read it."
        token = claimlog.token_for("lovelace")
        claimlog.send(token, "file_disagreement", claim_id=LONG_PAGE, disagreement_id="while-reading", argument=argument)
        until_sync(
            lambda: argument in (driver.execute_script("return document.getElementById('open-disagreements').textContent") or ""),
            timeout=10, what="the page showing the write",
        )
        assert driver.find_element(By.CSS_SELECTOR, "details#resolved-disagreements").get_attribute("open") is not None
        assert not blocked(driver)
    finally:
        driver.quit()
