"""Search as of a past point, in JSON and as a page: the statements as they were then, read by the rules of
the database's own search code (services/read_api/search_text.py)."""

from __future__ import annotations

import re

from sqlalchemy import Engine

from tests.conftest import random_claim_id
from tests.integration.command_api import Api, draft
from tests.integration.test_as_of import send_all
from tests.integration.test_listing_as_of import every_page

STATEMENTS = {
    "often": "Graphene sensors, and graphene again: graphene is what helps.",
    "once": "Tool use, retrieval, memory and graphene coatings help agents in long tasks.",
    "never": "Planning before acting helps small models.",
}


async def a_registry_whose_statement_changed(api: Api) -> tuple[dict[str, str], int, int]:
    """Three claims drafted; then, after the point returned first, the one that said graphene most often
    revised to say telescopes instead (the second point)."""
    ids = {name: random_claim_id() for name in STATEMENTS}
    for name, statement in STATEMENTS.items():
        await send_all(api, ids[name], [("draft_claim", "drafter", {**draft(ids[name]), "statement": statement})])
    before = await send_all(api, ids["never"], [("attach_source", "bot", {"source_id": "s1", "relation": "validates",
                                                                          "measured": "Run 1."})])
    revision = {"statement": "Telescopes, planned with care, help.", "reason": "Narrower."}
    after = await send_all(api, ids["often"], [("revise_claim", "ada", revision)])
    await api.http.get("/claims", params={"after": after})
    return ids, before, after


def names(ids: dict[str, str], pages: list[tuple[str, list[dict]]]) -> list[str]:
    by_id = {claim_id: name for name, claim_id in ids.items()}
    return [by_id[item["claim_id"]] for _, items in pages for item in items]


async def test_a_search_as_of_a_point_finds_the_statements_as_they_were_then(api: Api):
    ids, before, after = await a_registry_whose_statement_changed(api)
    assert names(ids, await every_page(api, {"q": "graphene", "as_of_seq": before})) == ["often", "once"]
    assert names(ids, await every_page(api, {"q": "graphene", "as_of_seq": after})) == ["once"]
    assert names(ids, await every_page(api, {"q": "telescope", "as_of_seq": before})) == []
    assert names(ids, await every_page(api, {"q": "telescope", "as_of_seq": after})) == ["often"]
    # Stemmed as the database stems: "plans" finds "planned" and "Planning"; a phrase, an exclusion, an or.
    assert names(ids, await every_page(api, {"q": "plans", "as_of_seq": after, "sort": "id"})) == sorted(
        ["often", "never"], key=ids.get)
    assert names(ids, await every_page(api, {"q": '"graphene coating"', "as_of_seq": before})) == ["once"]
    assert names(ids, await every_page(api, {"q": "graphene -sensors", "as_of_seq": before})) == ["once"]
    assert names(ids, await every_page(api, {"q": "telescopes or acting", "as_of_seq": after, "sort": "id"})) == sorted(
        ["often", "never"], key=ids.get)
    # The present search, through the database's index, says what the statements say now.
    assert names(ids, await every_page(api, {"q": "graphene"})) == ["once"]
    assert names(ids, await every_page(api, {"q": "telescope"})) == ["often"]


async def test_a_past_search_ranks_by_relevance_a_page_at_a_time(api: Api):
    ids, before, _ = await a_registry_whose_statement_changed(api)
    pages = await every_page(api, {"q": "graphene", "as_of_seq": before, "limit": 1})
    assert [sort for sort, _ in pages] == ["relevance"] * 2 and names(ids, pages) == ["often", "once"]
    body = (await api.http.get("/claims", params={"q": "graphene", "as_of_seq": before})).json()
    assert body["sort"] == "relevance" and body["as_of_seq"] == before
    by_id = names(ids, await every_page(api, {"q": "graphene", "as_of_seq": before, "sort": "id"}))
    assert by_id == sorted(["often", "once"], key=ids.get)
    cursor = (await api.http.get("/claims", params={"q": "graphene", "as_of_seq": before, "limit": 1})).json()["next_cursor"]
    elsewhere = await api.http.get("/claims", params={"q": "graphene", "limit": 1, "cursor": cursor})
    assert elsewhere.status_code == 400 and elsewhere.json()["error"] == "bad_cursor"


async def test_a_past_search_at_the_head_finds_what_the_present_search_finds(api: Api, engine: Engine):
    """The same claims in the same order on both databases: the past search is the database's own search
    (SQLite's FTS5 and bm25(), PostgreSQL's tsvectors and ts_rank)."""
    ids, _, after = await a_registry_whose_statement_changed(api)
    for q in ("helps", "help -graphene", "telescopes or graphene", '"memory and graphene"', "with care", "in long"):
        present = names(ids, await every_page(api, {"q": q}))
        past = names(ids, await every_page(api, {"q": q, "as_of_seq": after}))
        assert present and past == present, q


async def test_the_listing_page_searches_as_of_a_point_under_the_banner(api: Api):
    ids, before, after = await a_registry_whose_statement_changed(api)
    page = await api.http.get("/pages/claims", params={"as_of_seq": before, "q": "graphene", "limit": 1})
    assert page.status_code == 200
    assert f"As it stood at <strong>log sequence {before}</strong>" in page.text
    assert re.findall(r'<tr id="(CLM-[0-9]+)"', page.text) == [ids["often"]] and "2 claims match." in page.text
    assert "Graphene sensors" in page.text and "Telescopes" not in page.text
    assert f'<input type="hidden" name="as_of_seq" value="{before}">' in page.text
    following = re.search(r'href="(/pages/claims\?[^"]*cursor=[^"]*)"', page.text)
    assert following is not None and f"as_of_seq={before}" in following.group(1)
    second = await api.http.get(following.group(1).replace("&amp;", "&"))
    assert re.findall(r'<tr id="(CLM-[0-9]+)"', second.text) == [ids["once"]]
    later = await api.http.get("/pages/claims", params={"as_of_seq": after, "q": "graphene"})
    assert re.findall(r'<tr id="(CLM-[0-9]+)"', later.text) == [ids["once"]] and "1 claim matches." in later.text
