"""A claim with 150 disagreements, on SQLite and PostgreSQL: the JSON page stays whole, the disagreements
route walks all of them exactly once in the page's order (now and as of a past point), refuses a bad
cursor or limit naming the parameter, and the HTML page folds the resolved ones under their exact count."""

from __future__ import annotations

import re

from events import Event
from services.log import ClaimLog
from tests.builders import answered, drafted, filed, resolved
from tests.integration.command_api import Api

MANY = 150
OUTCOMES = ("upheld", "rejected", "withdrawn")


def _life(claim_id: str) -> list[Event]:
    """Drafted, then 150 disagreements: every third answered, every fourth resolved (after the first 100
    are filed, so a point between holds the first 100, all open)."""
    events: list[Event] = [drafted(claim_id)]
    events += [filed(claim_id, f"d{n:03}", argument=f"Objection number {n}.") for n in range(MANY)]
    events += [answered(claim_id, f"d{n:03}", answer=f"Answer to {n}.") for n in range(0, MANY, 3)]
    events += [resolved(claim_id, f"d{n:03}", OUTCOMES[n % 3]) for n in range(0, MANY, 4)]
    return events


async def _many_disagreements(api: Api, claim_log: ClaimLog, claim_id: str) -> tuple[int, int]:
    """The claim's events in the log, in two appends: the sequence after its 100th filing, and its last."""
    events = _life(claim_id)
    first = await claim_log.append(claim_id, events[:101], expected_seq=0, prev_hash=None)
    last = await claim_log.append(claim_id, events[101:], expected_seq=first.last_seq, prev_hash=first.last_hash)
    response = await api.http.get(f"/claims/{claim_id}", params={"after": last.last_seq})
    assert response.status_code == 200, response.text
    return first.last_seq, last.last_seq


async def _walk(api: Api, claim_key: str, limit: int, **params) -> tuple[list[dict], int]:
    """Every disagreement the route gives, following ``next_after_id``; and how many pages that took."""
    items, after_id, pages = [], None, 0
    while True:
        asked = {"limit": limit, **params, **({"after_id": after_id} if after_id else {})}
        response = await api.http.get(f"/claims/{claim_key}/disagreements", params=asked)
        assert response.status_code == 200, response.text
        body = response.json()
        assert len(body["items"]) <= limit
        items += body["items"]
        pages += 1
        after_id = body["next_after_id"]
        if after_id is None:
            return items, pages
        assert after_id == body["items"][-1]["disagreement_id"]


async def test_the_json_page_stays_whole_and_the_route_walks_every_disagreement_once_in_order(
    api: Api, claim_log: ClaimLog, claim_id: str
):
    _, last = await _many_disagreements(api, claim_log, claim_id)
    page = await api.page(claim_id, after=last)
    assert len(page["disagreements"]) == MANY
    assert page["counts"]["disagreements_resolved"] == len(range(0, MANY, 4))

    items, pages = await _walk(api, claim_id, 40)
    assert pages == 4
    assert [d["disagreement_id"] for d in items] == [f"d{n:03}" for n in range(MANY)]
    assert items == page["disagreements"]  # the page's own items, answers and outcomes included

    by_slug, _ = await _walk(api, page["slug"], 200)
    assert by_slug == page["disagreements"]
    first = (await api.http.get(f"/claims/{claim_id}/disagreements")).json()
    assert first["claim_id"] == claim_id and len(first["items"]) == 50
    assert first["total"] == MANY and first["as_of_seq"] == page["as_of_seq"]


async def test_the_route_walks_a_past_page_as_it_stood(api: Api, claim_log: ClaimLog, claim_id: str):
    point, _ = await _many_disagreements(api, claim_log, claim_id)
    past = (await api.http.get(f"/claims/{claim_id}", params={"as_of_seq": point})).json()

    items, pages = await _walk(api, claim_id, 30, as_of_seq=point)
    assert pages == 4
    assert items == past["disagreements"]
    assert [d["disagreement_id"] for d in items] == [f"d{n:03}" for n in range(100)]
    assert {d["state"] for d in items} == {"open"}  # resolved only after this point

    later = await api.http.get(f"/claims/{claim_id}/disagreements", params={"as_of_seq": point, "after_id": "d120"})
    assert later.status_code == 422
    assert later.json()["error"] == "bad_cursor"
    assert later.json()["problems"][0]["where"] == "query.after_id"
    assert f"as of sequence {point}" in later.json()["message"]


async def test_a_bad_cursor_or_limit_is_refused_naming_the_parameter(api: Api, claim_log: ClaimLog, claim_id: str):
    await _many_disagreements(api, claim_log, claim_id)
    route = f"/claims/{claim_id}/disagreements"
    for limit in ("0", "201", "-1", "ten", "1.5"):
        response = await api.http.get(route, params={"limit": limit})
        assert response.status_code == 422, (limit, response.text)
        body = response.json()
        assert body["error"] == "invalid_request"
        assert [p["where"] for p in body["problems"]] == ["query.limit"], body

    malformed = await api.http.get(route, params={"after_id": "not an id!"})
    assert malformed.status_code == 422
    assert [p["where"] for p in malformed.json()["problems"]] == ["query.after_id"]

    unknown = await api.http.get(route, params={"after_id": "d999"})
    assert unknown.status_code == 422
    body = unknown.json()
    assert body["error"] == "bad_cursor"
    assert [p["where"] for p in body["problems"]] == ["query.after_id"]
    assert "'d999'" in body["message"] and "next_after_id" in body["message"]

    missing = await api.http.get("/claims/CLM-9999/disagreements")
    assert missing.status_code == 404 and missing.json()["error"] == "claim_not_found"
    both = await api.http.get(route, params={"as_of_seq": "1", "as_of": "2026-12-01T00:00:00Z"})
    assert both.status_code == 400 and both.json()["error"] == "bad_as_of"


async def test_the_html_page_folds_the_resolved_disagreements_under_their_exact_count(
    api: Api, claim_log: ClaimLog, claim_id: str
):
    _, last = await _many_disagreements(api, claim_log, claim_id)
    page = await api.page(claim_id, after=last)
    html = (await api.http.get(f"/pages/claims/{claim_id}")).text
    resolved_count = page["counts"]["disagreements_resolved"]
    open_count = page["counts"]["disagreements_open"]
    assert open_count + resolved_count == MANY

    assert f"<td>{open_count} open, {resolved_count} resolved</td>" in html
    open_part, folded = html.split('<details class="folded" id="resolved-disagreements">')
    folded = folded.split("</details>")[0]
    summary = re.search(r"<summary>(.*?)</summary>", folded, re.S).group(1)
    by_outcome = {o: sum(1 for d in page["disagreements"] if d["outcome"] == o) for o in OUTCOMES}
    assert summary.split() == (
        f"{resolved_count} resolved disagreements: {by_outcome['upheld']} upheld, "
        f"{by_outcome['rejected']} rejected, {by_outcome['withdrawn']} withdrawn"
    ).split()
    assert folded.count('<li class="disagreement resolved"') == resolved_count
    assert open_part.count('<li class="disagreement open"') == open_count
    assert 'class="disagreement resolved"' not in open_part  # open ones first, none folded
