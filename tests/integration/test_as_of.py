"""Any claim page and the scorecard as of any moment, folded from the log, against the live answers captured then."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta

from typer.testing import CliRunner

from services.cli import app as cli
from tests.conftest import random_claim_id
from tests.integration.command_api import Api, draft

OTHER_STATEMENT = "Reflection after acting helps small models."


async def send_all(api: Api, claim: str, steps: list[tuple[str, str, dict]]) -> int:
    last = 0
    for command, who, body in steps:
        response = await api.send(command, who, **{"claim_id": claim, **body})
        assert response.status_code == 201, response.text
        last = response.json()["last_seq"]
    return last


def first_steps() -> list[tuple[str, str, dict]]:
    return [
        ("draft_claim", "drafter", {}),
        ("attach_source", "bot", {"source_id": "s1", "relation": "validates", "measured": "Accuracy on GSM8K."}),
        ("attach_source", "bot", {"source_id": "s2", "relation": "supports", "measured": "Accuracy on MATH."}),
        ("file_disagreement", "grace", {"disagreement_id": "d1", "argument": "Two backbones are too few."}),
        ("relate_claims", "ada", {"statement": OTHER_STATEMENT, "rank": 1}),
    ]


def later_steps() -> list[tuple[str, str, dict]]:
    return [
        ("revise_claim", "ada", {"statement": "Planning before acting helps small models on math.", "reason": "Narrower."}),
        ("correct_source", "ada", {"source_id": "s2", "relation": "qualifies"}),
        ("withdraw_source", "bot", {"source_id": "s1", "reason": "Wrong paper."}),
        ("attach_source", "bot", {"source_id": "s3", "relation": "contradicts", "measured": "No effect."}),
        ("resolve_disagreement", "ada", {"disagreement_id": "d1", "outcome": "upheld"}),
        ("record_review", "grace", {"review_id": "r1", "verdict": "sound", "confidence": "high", "revision": 2}),
    ]


async def claim_with_a_past(api: Api) -> tuple[str, dict, int, dict, int]:
    """A claim whose live page was captured after its first steps (and again after more), with other claims
    written in between, one of them the claim its page related to by statement only."""
    claim, other = random_claim_id(), random_claim_id()
    steps = first_steps()
    steps[0] = ("draft_claim", "drafter", {k: v for k, v in draft(claim).items() if k != "claim_id"})
    first = await send_all(api, claim, steps)
    then = await api.page(claim, after=first)
    await send_all(api, other, [("draft_claim", "ada", {**draft(other), "statement": OTHER_STATEMENT})])
    last = await send_all(api, claim, later_steps())
    now = await api.page(claim, after=last)
    return claim, then, first, now, last


async def test_a_page_as_of_a_sequence_is_the_live_page_as_it_was_then(api: Api):
    claim, then, first, now, last = await claim_with_a_past(api)
    assert then != now and then["related"][0]["claim_id"] is None and now["related"][0]["claim_id"] is not None

    for key in (claim, then["slug"]):
        past = await api.http.get(f"/claims/{key}", params={"as_of_seq": first})
        assert past.status_code == 200, past.text
        assert past.json() == then
    # The next sequence drafted the claim the page relates to by statement: the same page, now linking to it.
    linked = (await api.http.get(f"/claims/{claim}", params={"as_of_seq": first + 1})).json()
    assert linked["related"][0]["claim_id"] == now["related"][0]["claim_id"]
    assert {**linked, "related": None} == {**then, "related": None}
    assert (await api.http.get(f"/claims/{claim}", params={"as_of_seq": last})).json() == now
    assert (await api.http.get(f"/claims/{claim}", params={"as_of_seq": last + 1000})).json() == now
    middle = (await api.http.get(f"/claims/{claim}", params={"as_of_seq": last - 1})).json()
    assert middle["status"]["review_state"] == "unreviewed" and middle["revision"] == 2


async def test_a_page_as_of_a_time_takes_the_events_stored_at_or_before_it(api: Api):
    claim, then, first, now, last = await claim_with_a_past(api)
    stored_then = datetime.fromisoformat(then["as_of_time"])
    stored_next = datetime.fromisoformat(now["as_of_time"])
    assert stored_next > stored_then

    for moment in (stored_then, stored_then + (stored_next - stored_then) / 1000):
        past = await api.http.get(f"/claims/{claim}", params={"as_of": moment.isoformat()})
        assert past.status_code == 200, past.text
        assert past.json() == then
    assert (await api.http.get(f"/claims/{claim}", params={"as_of": stored_next.isoformat()})).json() == now
    zulu = stored_next.astimezone().isoformat()  # the same moment in another zone
    assert (await api.http.get(f"/claims/{claim}", params={"as_of": zulu})).json() == now


async def test_a_claim_not_drafted_then_is_not_found_and_a_bad_point_is_refused(api: Api):
    earlier = random_claim_id()
    before = await send_all(api, earlier, [("draft_claim", "ada", {k: v for k, v in draft(earlier).items() if k != "claim_id"})])
    claim, then, first, *_ = await claim_with_a_past(api)
    drafted_at = datetime.fromisoformat(then["notes"]["drafted"]["at"])

    for params in ({"as_of_seq": 0}, {"as_of_seq": before}, {"as_of": (drafted_at - timedelta(microseconds=1)).isoformat()}):
        response = await api.http.get(f"/claims/{claim}", params=params)
        assert response.status_code == 404, (params, response.text)
        assert response.json()["error"] == "claim_not_found"
    assert (await api.http.get("/claims/no-such-slug", params={"as_of_seq": first})).status_code == 404
    assert (await api.http.get(f"/claims/{random_claim_id()}", params={"as_of_seq": first})).status_code == 404

    refused = {
        "both": {"as_of_seq": first, "as_of": "2026-11-30T12:00:00Z"},
        "negative": {"as_of_seq": -1},
        "not a number": {"as_of_seq": "ten"},
        "not a time": {"as_of": "yesterday"},
        "no zone": {"as_of": "2026-11-30T12:00:00"},
    }
    for why, params in refused.items():
        response = await api.http.get(f"/claims/{claim}", params=params)
        assert response.status_code == 400, (why, response.text)
        assert response.json()["error"] == "bad_as_of", why
    assert "not both" in (await api.http.get(f"/claims/{claim}", params=refused["both"])).json()["message"]
    assert "negative" in (await api.http.get(f"/claims/{claim}", params=refused["negative"])).json()["message"]
    assert "time zone" in (await api.http.get(f"/claims/{claim}", params=refused["no zone"])).json()["message"]


async def test_a_pages_text_as_of_a_point_is_its_text_as_it_stood_then(api: Api):
    claim = random_claim_id()
    first = await send_all(api, claim, [("draft_claim", "drafter", {k: v for k, v in draft(claim).items() if k != "claim_id"}),
                                        *first_steps()[1:]])
    then = await api.http.get(f"/claims/{claim}/text", params={"after": first})
    then_page = await api.page(claim, after=first)
    last = await send_all(api, claim, later_steps())
    now = (await api.http.get(f"/claims/{claim}/text", params={"after": last})).text
    assert then.status_code == 200 and then.text != now
    assert "Planning before acting helps small models on math." in now

    for params in ({"as_of_seq": first}, {"as_of": then_page["as_of_time"]}, {"as_of_seq": last - 1}):
        past = await api.http.get(f"/claims/{claim}/text", params=params)
        assert past.status_code == 200, (params, past.text)
        assert past.headers["content-type"].startswith("text/plain")
        if "as_of_seq" in params and params["as_of_seq"] == last - 1:
            assert past.text not in (then.text, now)  # revised, the review not recorded yet
        else:
            assert past.text == then.text, params
    assert (await api.http.get(f"/claims/{then_page['slug']}/text", params={"as_of_seq": first})).text == then.text
    assert (await api.http.get(f"/claims/{claim}/text", params={"as_of_seq": last})).text == now

    not_drafted = await api.http.get(f"/claims/{claim}/text", params={"as_of_seq": 0})
    assert not_drafted.status_code == 404 and not_drafted.json()["error"] == "claim_not_found"
    assert "as of" in not_drafted.json()["message"]
    for params in ({"as_of_seq": "abc"}, {"as_of_seq": first, "as_of": then_page["as_of_time"]}, {"as_of": "yesterday"}):
        refused = await api.http.get(f"/claims/{claim}/text", params=params)
        assert refused.status_code == 400, (params, refused.text)
        assert refused.json()["error"] == "bad_as_of"


async def test_the_scorecard_as_of_a_point_is_the_live_scorecard_captured_then(api: Api):
    capability = f"Capability {random_claim_id()}"
    claims = [random_claim_id() for _ in range(3)]
    for claim in claims:
        await api.send("draft_claim", "ada", **{**draft(claim), "capability": capability, "technique": "Planning first"})
    await api.send("attach_source", "bot", claim_id=claims[0], source_id="s", relation="validates", measured="x")
    first = (await api.send("draft_claim", "drafter", **{**draft(random_claim_id()), "capability": capability})).json()["last_seq"]
    then = (await api.http.get("/scorecard", params={"after": first})).json()
    then_one = (await api.http.get(f"/scorecard/{capability}", params={"after": first})).json()

    await api.send("attach_source", "bot", claim_id=claims[1], source_id="s", relation="contradicts", measured="x")
    await api.send("retract_claim", "ada", claim_id=claims[2], reason="Contaminated.")
    last = (await api.send("attach_source", "bot", claim_id=claims[0], source_id="t", relation="contradicts", measured="y")).json()["last_seq"]
    now = (await api.http.get("/scorecard", params={"after": last})).json()
    assert now["capabilities"] != then["capabilities"]

    for _ in range(2):  # the second time from the kept rows
        past = (await api.http.get("/scorecard", params={"as_of_seq": first})).json()
        assert past["capabilities"] == then["capabilities"] and past["applied_seq"] == first
    assert (await api.http.get("/scorecard", params={"as_of_seq": last})).json()["capabilities"] == now["capabilities"]
    # Back to an earlier point after a later one: the fold starts again.
    past_one = (await api.http.get(f"/scorecard/{capability}", params={"as_of_seq": first})).json()
    assert past_one["capabilities"] == then_one["capabilities"]
    [score] = past_one["capabilities"]
    assert score["by_standing"]["validated"] == 1 and score["unreviewed_model_drafts_left_out"] == 1

    history = (await api.http.get(f"/claims/{claims[0]}/history")).json()["events"]
    stored_then = [e for e in history if e["seq"] < first][-1]["stored_at"]
    by_time = (await api.http.get(f"/scorecard/{capability}", params={"as_of": stored_then})).json()
    assert by_time["applied_seq"] < first and by_time["capabilities"][0]["unreviewed_model_drafts_left_out"] == 0
    assert (await api.http.get("/scorecard", params={"as_of_seq": 0})).json()["capabilities"] == []
    assert (await api.http.get(f"/scorecard/{capability}", params={"as_of_seq": 0})).status_code == 404
    assert (await api.http.get("/scorecard", params={"as_of_seq": -3})).status_code == 400


async def test_claimlog_show_prints_the_page_as_of_a_point(api: Api, nats_url: str, database_url: str):
    claim, then, first, now, last = await claim_with_a_past(api)
    env = {"CLAIMLOG_NATS_URL": nats_url, "CLAIMLOG_DATABASE_URL": database_url}
    runner = CliRunner()

    shown = await asyncio.to_thread(runner.invoke, cli, ["show", claim, "--as-of-seq", str(first), "--json"], env=env)
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout) == then
    by_time = await asyncio.to_thread(runner.invoke, cli, ["show", then["slug"], "--as-of", then["as_of_time"], "--json"], env=env)
    assert json.loads(by_time.stdout) == then
    live = await asyncio.to_thread(runner.invoke, cli, ["show", claim], env=env)
    assert live.exit_code == 0, live.output
    assert "Planning before acting helps small models on math." in live.stdout and "revision 2" in live.stdout

    missing = await asyncio.to_thread(runner.invoke, cli, ["show", claim, "--as-of-seq", "0"], env=env)
    assert missing.exit_code == 1
    both = await asyncio.to_thread(runner.invoke, cli, ["show", claim, "--as-of-seq", "1", "--as-of", "2026-11-30T12:00:00Z"], env=env)
    assert both.exit_code == 2 and "not both" in both.output
