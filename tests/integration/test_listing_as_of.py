"""The listing as of a past point, in JSON and as a page: the live listing as it was captured then."""

from __future__ import annotations

import re

from tests.conftest import random_claim_id
from tests.integration.command_api import Api, draft
from tests.integration.test_as_of import send_all

QUERIES = (
    {},
    {"sort": "contested"},
    {"sort": "recent", "limit": 1},
    {"sort": "evidence", "limit": 2},
    {"include_closed": "true"},
    {"lifecycle": "retracted"},
    {"open_disagreement": "true"},
    {"capability": "Planning", "review_state": "unreviewed"},
)


async def every_page(api: Api, params: dict) -> list[dict]:
    """Each page of the listing asked for, followed through its cursors: sort and items."""
    pages, cursor = [], None
    while True:
        body = (await api.http.get("/claims", params={**params, **({"cursor": cursor} if cursor else {})})).json()
        pages.append((body["sort"], body["items"]))
        if (cursor := body["next_cursor"]) is None:
            return pages


async def a_registry_with_a_past(api: Api) -> tuple[list[str], int]:
    """Three claims, one with a disagreement; then, after the point returned, one revised and one retracted."""
    claims = sorted(random_claim_id() for _ in range(3))
    for n, claim in enumerate(claims):
        steps = [("draft_claim", "drafter", {**draft(claim), "slug": f"claim-{claim.lower()}"})]
        steps += [("attach_source", "bot", {"source_id": f"s{i}", "relation": "validates", "measured": f"Run {i}."})
                  for i in range(n)]
        await send_all(api, claim, steps)
    first = await send_all(api, claims[0], [("file_disagreement", "grace", {"disagreement_id": "d1", "argument": "Too few."})])
    await send_all(api, claims[1], [("revise_claim", "ada", {"statement": "Planning helps, revised.", "reason": "Narrower."})])
    last = await send_all(api, claims[2], [("retract_claim", "ada", {"reason": "Wrong paper."})])
    await api.http.get("/claims", params={"after": last})
    return claims, first


async def test_the_listing_as_of_a_point_is_the_live_listing_captured_then(api: Api):
    claims = sorted(random_claim_id() for _ in range(3))
    for n, claim in enumerate(claims):
        steps = [("draft_claim", "drafter", {**draft(claim), "slug": f"claim-{claim.lower()}"})]
        steps += [("attach_source", "bot", {"source_id": f"s{i}", "relation": "validates", "measured": f"Run {i}."})
                  for i in range(n)]
        await send_all(api, claim, steps)
    first = await send_all(api, claims[0], [("file_disagreement", "grace", {"disagreement_id": "d1", "argument": "Too few."})])
    await api.http.get("/claims", params={"after": first})
    then = {str(q): await every_page(api, q) for q in QUERIES}
    await send_all(api, claims[1], [("revise_claim", "ada", {"statement": "Planning helps, revised.", "reason": "Narrower."})])
    last = await send_all(api, claims[2], [("retract_claim", "ada", {"reason": "Wrong paper."})])
    await api.http.get("/claims", params={"after": last})
    now = {str(q): await every_page(api, q) for q in QUERIES}
    assert now != then  # the later writes changed what the listings show
    for query in QUERIES:
        assert await every_page(api, {**query, "as_of_seq": first}) == then[str(query)], query
        assert await every_page(api, {**query, "as_of_seq": last}) == now[str(query)], query
    body = (await api.http.get("/claims", params={"as_of_seq": first})).json()
    assert body["as_of_seq"] == first and (await api.http.get("/claims")).json()["as_of_seq"] is None
    assert (await api.http.get("/claims", params={"as_of_seq": 0})).json()["items"] == []


async def test_a_past_listing_refuses_a_bad_point_a_bad_search_and_a_cursor_of_another_point(api: Api):
    claims, first = await a_registry_with_a_past(api)
    for params, error in (({"q": " - ! "}, "bad_query"), ({"sort": "relevance"}, "bad_sort")):
        search = await api.http.get("/claims", params={"as_of_seq": first, **params})
        assert search.status_code == 400 and search.json()["error"] == error
    bad = await api.http.get("/claims", params={"as_of": "yesterday"})
    assert bad.status_code == 400 and bad.json()["error"] == "bad_as_of"
    cursor = (await api.http.get("/claims", params={"limit": 1})).json()["next_cursor"]
    other = await api.http.get("/claims", params={"limit": 1, "cursor": cursor, "as_of_seq": first})
    assert other.status_code == 400 and other.json()["error"] == "bad_cursor"


async def test_the_listing_page_as_of_a_point_shows_the_claims_then_under_the_banner(api: Api):
    claims, first = await a_registry_with_a_past(api)
    page = await api.http.get("/pages/claims", params={"as_of_seq": first})
    assert page.status_code == 200
    assert f"As it stood at <strong>log sequence {first}</strong>" in page.text
    assert '<a href="/pages/claims">As it is now</a>' in page.text
    assert "Planning helps, revised." not in page.text and "3 claims match." in page.text  # not yet revised, nor retracted
    assert f'href="/pages/claims/{claims[0]}?as_of_seq={first}"' in page.text
    assert f'<input type="hidden" name="as_of_seq" value="{first}">' in page.text  # the form keeps the point
    now = await api.http.get("/pages/claims")
    assert "As it stood" not in now.text and "Planning helps, revised." in now.text and "2 claims match." in now.text
    filtered = await api.http.get("/pages/claims", params={"as_of_seq": first, "open_disagreement": "true"})
    assert re.findall(r'<tr id="(CLM-[0-9]+)"', filtered.text) == [claims[0]]
    search = await api.http.get("/pages/claims", params={"as_of_seq": first, "q": "-planning"})
    assert search.status_code == 400 and "names no word" in search.text and "As it stood" in search.text
    bad = await api.http.get("/pages/claims", params={"as_of_seq": "ten"})
    assert bad.status_code == 400 and "No such point of the log" in bad.text
