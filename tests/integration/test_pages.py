"""The pages for people without a browser, on SQLite and PostgreSQL: the listing page's search and filters
list what ``GET /claims`` lists, bad input gets a message and a 400, and the scorecard page draws the
numbers of ``GET /scorecard``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from html.parser import HTMLParser

import pytest

from tests.conftest import random_claim_id
from tests.integration.command_api import Api, draft

CLAIMS = {  # name: (who drafts it, statement, capability, technique)
    "plan": ("ada", "Planning before acting helps small models.", "Planning", "Plan first"),
    "agents": ("drafter", "Agents that plan their tool calls fail less often.", "Planning", None),
    "retrieval": ("ada", "Retrieval augments reasoning in large language models.", "Retrieval", None),
    "retracted": ("ada", "Planning helps, in a study that was withdrawn.", "Planning", None),
}
CLAIM_LINK = re.compile(r'class="claim-link" href="/pages/claims/(CLM-\d+)"')


@dataclass
class Registry:
    """Claims made through the command API, by name, and the log sequence that shows them all."""

    api: Api
    ids: dict[str, str]
    last: int = 0

    async def send(self, command: str, who: str, name: str, **body) -> None:
        response = await self.api.send(command, who, claim_id=self.ids[name], **body)
        assert response.status_code == 201, response.text
        self.last = response.json()["last_seq"]

    async def page(self, path: str, **params) -> tuple[int, str]:
        response = await self.api.http.get(path, params={"after": self.last, **params})
        assert response.headers["content-type"].startswith("text/html")
        return response.status_code, response.text

    async def listed(self, **params) -> list[str]:
        """The names of the claims the listing page shows, in its order."""
        status, html = await self.page("/pages/claims", **params)
        assert status == 200, html
        by_id = {claim_id: name for name, claim_id in self.ids.items()}
        return [by_id[claim_id] for claim_id in CLAIM_LINK.findall(html)]

    async def json_listed(self, **params) -> list[str]:
        """The names of the claims ``GET /claims`` lists for the same parameters."""
        response = await self.api.http.get("/claims", params={"after": self.last, **params})
        by_id = {claim_id: name for name, claim_id in self.ids.items()}
        return [by_id[item["claim_id"]] for item in response.json()["items"]]


@pytest.fixture
async def registry(api: Api) -> Registry:
    """Four claims: two of Planning that match "planning", one with an open disagreement, one retracted."""
    registry = Registry(api, {name: random_claim_id() for name in CLAIMS})
    for name, (who, statement, capability, technique) in CLAIMS.items():
        body = {**draft(registry.ids[name]), "statement": statement, "capability": capability, "technique": technique}
        await registry.send("draft_claim", who, name, **{k: v for k, v in body.items() if k != "claim_id"})
    await registry.send("attach_source", "bot", "plan", source_id="s1", relation="validates", measured="+4 points.")
    await registry.send("attach_source", "bot", "agents", source_id="s1", relation="contradicts", measured="No gain.")
    await registry.send("file_disagreement", "grace", "retrieval", disagreement_id="d1", argument="Leakage.")
    await registry.send("retract_claim", "ada", "retracted", reason="The study was withdrawn.")
    return registry


async def test_the_listing_page_searches_and_filters_as_the_json_listing_does(registry: Registry):
    # A plain GET form sends every field, the ones left empty too: those filter nothing.
    form = {"q": "helps", "capability": "", "lifecycle": "", "open_disagreement": "", "sort": ""}
    assert await registry.listed(**form) == ["plan"]
    status, html = await registry.page("/pages/claims", **form)
    assert '<p id="result-count">1 claim matches.</p>' in html
    assert 'value="helps"' in html  # the search box keeps what was typed
    closed_too = {**form, "include_closed": "true", "sort": "id"}
    assert await registry.listed(**closed_too) == sorted(["plan", "retracted"], key=registry.ids.get)
    assert await registry.listed(q="", lifecycle="retracted") == ["retracted"]
    assert await registry.listed(open_disagreement="true") == ["retrieval"]
    assert await registry.listed(capability="Planning", open_disagreement="false", sort="recent") == ["agents", "plan"]
    for params in ({}, {"q": "plan"}, {"capability": "Planning", "include_closed": "true"}, {"sort": "evidence"}):
        assert await registry.listed(**params) == await registry.json_listed(**params)
    _, html = await registry.page("/pages/claims", q="memorize")
    assert "No claims match." in html and not CLAIM_LINK.findall(html)


async def test_the_next_page_link_carries_the_search_and_its_cursor(registry: Registry):
    status, html = await registry.page("/pages/claims", q="plan", include_closed="true", limit="1")
    assert status == 200 and '<p id="result-count">3 claims match.</p>' in html
    shown = CLAIM_LINK.findall(html)
    while match := re.search(r'<a rel="next" href="([^"]+)"', html):
        next_url = match.group(1).replace("&amp;", "&")
        assert "q=plan" in next_url and "include_closed=true" in next_url and "cursor=" in next_url
        response = await registry.api.http.get(next_url)
        html = response.text
        shown += CLAIM_LINK.findall(html)
    assert len(shown) == 3 and len(set(shown)) == 3
    assert set(shown) == {registry.ids[name] for name in ("plan", "agents", "retracted")}


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"q": "-- !!"}, "names no word to look for"),
        ({"sort": "relevance"}, "sort=relevance ranks the claims a search finds: give q as well"),
        ({"limit": "0"}, "limit: Input should be greater than or equal to 1"),
        ({"open_disagreement": "maybe"}, "open_disagreement: Input should be a valid boolean"),
        ({"cursor": "not-a-cursor"}, "cursor is not one this API returned"),
    ],
)
async def test_a_search_that_cannot_be_run_gets_the_form_back_with_why_and_a_400(
    registry: Registry, params: dict, message: str
):
    status, html = await registry.page("/pages/claims", **params)
    assert status == 400
    problem = re.search(r'<p class="problem" id="problem" role="alert">(.*?)</p>', html, re.S)
    assert problem and message in problem.group(1).replace("&#39;", "'")
    assert '<form class="filter" method="get" action="/pages/claims"' in html and not CLAIM_LINK.findall(html)


async def test_a_cursor_of_another_search_gets_a_400_that_says_so(registry: Registry):
    _, html = await registry.page("/pages/claims", limit="1")
    cursor = re.search(r"cursor=([^\"&]+)", html).group(1)
    status, html = await registry.page("/pages/claims", limit="1", q="planning", cursor=cursor)
    assert status == 400 and "cursor belongs to a listing with another sort or other filters" in html


class ChartReader(HTMLParser):
    """The scorecard page's chart (bar groups and their segments) and its table rows."""

    def __init__(self) -> None:
        super().__init__()
        self.bars: dict[str, dict[str, int]] = {}
        self.table: dict[str, list[int]] = {}
        self.svgs = 0
        self._bar: str | None = None
        self._row: list[int] | None = None
        self._in_cell = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "svg":
            self.svgs += 1
        elif tag == "g" and found.get("class") == "bar":
            self._bar = found["data-label"]
            self.bars[self._bar] = {"counted": int(found["data-counted"]), "left out": int(found["data-left-out"])}
        elif tag == "rect" and found.get("class") == "segment":
            self.bars[self._bar][found["data-standing"]] = int(found["data-claims"])
        elif tag == "tr" and "data-label" in found:
            self._row = self.table[found["data-label"]] = []
        self._in_cell = tag == "td" and self._row is not None

    def handle_data(self, data: str) -> None:
        if self._in_cell and data.strip():
            self._row.append(int(data))


def expected_bars(score: dict) -> dict[str, int]:
    """What a capability's bar group should draw: each standing that has claims, and the totals."""
    bars = {standing: claims for standing, claims in score["by_standing"].items() if claims}
    left_out = score["unreviewed_model_drafts_left_out"]
    return {**bars, **({"left-out": left_out} if left_out else {}), "counted": score["claims_counted"], "left out": left_out}


async def test_the_scorecard_page_draws_the_numbers_of_the_json_scorecard(registry: Registry):
    card = (await registry.api.http.get("/scorecard", params={"after": registry.last})).json()
    status, html = await registry.page("/pages/scorecard")
    assert status == 200 and "<script>" not in html  # no inline script (only the app's own live.js, by URL)
    chart = ChartReader()
    chart.feed(html)
    assert chart.svgs == 1
    assert chart.bars == {score["capability"]: expected_bars(score) for score in card["capabilities"]}
    assert chart.bars["Planning"] == {"validated": 1, "left-out": 1, "counted": 1, "left out": 1}
    assert chart.table == {
        score["capability"]: [*score["by_standing"].values(), score["claims_counted"], score["unreviewed_model_drafts_left_out"]]
        for score in card["capabilities"]
    }
    assert chart.table["Retrieval"] == [0, 0, 0, 0, 1, 1, 0]
    assert '<a href="/pages/claims?capability=Planning">Planning</a>' in html
    assert "docs/scorecard.md" in html and '<a href="/pages/scorecard">Scorecard</a>' in html

    status, html = await registry.page("/pages/scorecard/Planning")
    chart = ChartReader()
    chart.feed(html)
    assert status == 200 and list(chart.bars) == ["Planning", "Plan first"]
    assert '<a href="/pages/claims?capability=Planning&amp;technique=Plan+first">Plan first</a>' in html
    status, html = await registry.page("/pages/scorecard/No such capability")
    assert status == 404 and "No such capability" in html


async def test_a_sources_caveats_stand_apart_from_its_result_on_the_page_and_in_the_text(registry: Registry):
    await registry.send("attach_source", "bot", "retrieval", source_id="s2", relation="validates",
                        measured="Recall rises on two benchmarks.", breadth="one seed, simulator only.")
    status, html = await registry.page(f"/pages/claims/{registry.ids['retrieval']}")
    assert status == 200, html
    assert '<div class="caveats"><strong>Measured:</strong> one seed, simulator only.</div>' in html
    text = await registry.api.http.get(f"/claims/{registry.ids['retrieval']}/text", params={"after": registry.last})
    assert "- Validated by: Recall rises on two benchmarks.. Measured: one seed, simulator only." in text.text


async def test_the_claim_page_and_the_scorecard_show_a_past_point_of_the_log_under_a_banner(api: Api):
    claim = random_claim_id()
    capability = f"Recall {claim}"
    first = await api.send("draft_claim", "ada", **{**draft(claim), "capability": capability})
    source = await api.send("attach_source", "bot", claim_id=claim, source_id="s1", relation="validates",
                            measured="Recall rises.")
    drafted, attached = first.json()["last_seq"], source.json()["last_seq"]

    then = await api.http.get(f"/pages/claims/{claim}", params={"as_of_seq": drafted, "after": attached})
    assert then.status_code == 200, then.text
    assert f"As it stood at <strong>log sequence {drafted}</strong>" in then.text
    assert f'<a href="/pages/claims/{claim}">As it is now</a>' in then.text
    assert f'<a href="/pages/claims/{claim}/history">its history</a>' in then.text
    assert "No sources yet." in then.text and "Recall rises." not in then.text

    now = await api.http.get(f"/pages/claims/{claim}", params={"after": attached})
    assert 'id="as-of"' not in now.text and "Recall rises." in now.text

    before = await api.http.get(f"/pages/claims/{claim}", params={"as_of_seq": drafted - 1})
    assert before.status_code == 404 and f"as of log sequence {drafted - 1}" in before.text

    card = await api.http.get(f"/pages/scorecard/{capability}", params={"as_of_seq": drafted, "after": attached})
    assert card.status_code == 200 and f"log sequence {drafted}" in card.text
    gone = await api.http.get(f"/pages/scorecard/{capability}", params={"as_of_seq": drafted - 1})
    assert gone.status_code == 404, gone.text
    everything = await api.http.get("/pages/scorecard", params={"as_of_seq": drafted - 1})
    assert everything.status_code == 200 and capability not in everything.text

    bad = await api.http.get(f"/pages/claims/{claim}", params={"as_of_seq": "soon"})
    assert bad.status_code == 400 and "not a log sequence" in bad.text


async def test_a_related_claims_label_is_checked_against_its_own_page(api: Api):
    related, claim = random_claim_id(), random_claim_id()
    statement = f"Reflection after acting helps small models, {related}."
    await api.send("draft_claim", "drafter", **{**draft(related), "statement": statement})
    await api.send("draft_claim", "ada", **draft(claim))
    sent = await api.send("relate_claims", "ada", claim_id=claim, statement=statement, capability="Planning",
                          review_label="reviewed by AI", rank=1)
    assert sent.status_code == 201, sent.text
    page = await api.page(claim, sent.json()["last_seq"])
    [entry] = page["related"]
    assert entry["claim_id"] == related
    assert (entry["review_state_now"], entry["label_disagrees"]) == ("unreviewed", True)
    html = (await api.http.get(f"/pages/claims/{claim}", params={"after": sent.json()["last_seq"]})).text
    assert "its page now: unreviewed" in html and "the related claim’s own page says “unreviewed”" in html

    reviewed = await api.send("record_review", "grace", claim_id=related, review_id="r1", verdict="sound",
                              confidence="high", revision=1)
    assert reviewed.status_code == 201, reviewed.text
    await api.page(related, reviewed.json()["last_seq"])  # a claim's page waits for its own partition only
    [entry] = (await api.page(claim, reviewed.json()["last_seq"]))["related"]
    assert (entry["review_state_now"], entry["label_disagrees"]) == ("reviewed by a person", True)


async def test_small_things_a_person_sees_an_icon_seconds_a_history_page_and_truncated_at_the_end(api: Api):
    claim = random_claim_id()
    drafted = (await api.send("draft_claim", "ada", **draft(claim))).json()["last_seq"]
    await api.send("attach_source", "bot", claim_id=claim, source_id="s1", relation="validates",
                   measured="Recall rises.", breadth="Measured: one seed, simulator only.", truncated=True)
    last = (await api.send("revise_claim", "ada", claim_id=claim, statement="Planning helps small models on math.",
                           reason="Narrower.")).json()["last_seq"]

    page = await api.http.get(f"/pages/claims/{claim}", params={"after": last})
    assert '<link rel="icon" href="/static/favicon.svg"' in page.text
    icon = await api.http.get("/static/favicon.svg")
    assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/svg+xml") and "<svg" in icon.text
    assert (await api.http.get("/favicon.ico", follow_redirects=True)).text == icon.text
    # [truncated] where the registry's text has it: at the end, after the Measured line.
    caveats = page.text[page.text.index('<div class="caveats">'):]
    assert caveats.index("one seed, simulator only.") < caveats.index("[truncated]") < caveats.index("</div>")
    text = (await api.http.get(f"/claims/{claim}/text")).text
    assert "Measured: one seed, simulator only. [truncated]" in text

    history = (await api.http.get(f"/claims/{claim}/history")).json()["events"]
    stored = datetime.fromisoformat(history[0]["stored_at"])
    then = await api.http.get(f"/pages/claims/{claim}", params={"as_of": stored.isoformat()})
    assert f"As it stood at <strong>{stored.strftime('%Y-%m-%d %H:%M:%S')} UTC</strong>" in then.text
    assert f'<a href="/pages/claims/{claim}/history">its history</a>' in then.text

    listed = await api.http.get(f"/pages/claims/{claim}/history")
    assert listed.status_code == 200 and listed.headers["content-type"].startswith("text/html")
    assert f'<a href="/pages/claims/{claim}?as_of_seq={drafted}">{drafted}</a>' in listed.text
    assert "ClaimDrafted" in listed.text and "ClaimRevised" in listed.text and "SourceAttached" in listed.text
    assert "<del>Planning before acting helps small models.</del> → <ins>Planning helps small models on math.</ins>" in listed.text
    assert "ada (person)" in listed.text and stored.strftime("%H:%M:%S") in listed.text
    missing = await api.http.get(f"/pages/claims/{random_claim_id()}/history")
    assert missing.status_code == 404 and "text/html" in missing.headers["content-type"]
