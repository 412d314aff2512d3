"""Counts, scorecard and change feed through the HTTP API, after real commands, on SQLite and PostgreSQL."""

from __future__ import annotations

from services.log import event_hash
from tests.conftest import random_claim_id
from tests.integration.command_api import Api, draft


async def history_with_everything(api: Api, claim: str) -> int:
    """A claim with withdrawals, a correction, a resolved disagreement, an AI review and a person review."""
    steps = [
        ("draft_claim", "drafter", draft(claim)),
        ("attach_source", "bot", {"source_id": "s1", "relation": "validates", "measured": "A."}),
        ("attach_source", "bot", {"source_id": "s2", "relation": "supports", "measured": "B."}),
        ("attach_source", "bot", {"source_id": "s3", "relation": "contradicts", "measured": "C."}),
        ("correct_source", "ada", {"source_id": "s2", "relation": "qualifies"}),
        ("withdraw_source", "bot", {"source_id": "s3", "reason": "Wrong paper."}),
        ("file_disagreement", "grace", {"disagreement_id": "d1", "argument": "Too small."}),
        ("file_disagreement", "grace", {"disagreement_id": "d2", "argument": "Leakage."}),
        ("resolve_disagreement", "ada", {"disagreement_id": "d1", "outcome": "rejected"}),
        ("record_review", "critic", {"review_id": "r1", "verdict": "sound", "confidence": "low", "revision": 1}),
        ("record_review", "grace", {"review_id": "r2", "verdict": "sound", "confidence": "high", "revision": 1}),
    ]
    last = 0
    for command, who, body in steps:
        response = await api.send(command, who, **{"claim_id": claim, **body})
        assert response.status_code == 201, response.text
        last = response.json()["last_seq"]
    return last


async def test_counts_match_the_lists_on_the_page(api: Api):
    claim = random_claim_id()
    last = await history_with_everything(api, claim)
    page = await api.page(claim, after=last)
    counts = (await api.http.get(f"/claims/{claim}/counts")).json()
    assert counts["as_of_seq"] == page["as_of_seq"] == last
    active = [s for s in page["sources"] if s["state"] == "active"]
    assert counts["sources_by_relation"] == {
        r: sum(1 for s in active if s["relation"] == r) for r in ("validates", "supports", "contradicts", "qualifies", "mentions")
    }
    assert counts["sources_by_relation"] == {"validates": 1, "supports": 0, "contradicts": 0, "qualifies": 1, "mentions": 0}
    assert counts["sources_withdrawn"] == 1 == sum(1 for s in page["sources"] if s["state"] == "withdrawn")
    assert (counts["disagreements_open"], counts["disagreements_resolved"]) == (1, 1)
    assert (counts["reviews_ai"], counts["reviews_person"]) == (1, 1)
    assert page["status"]["standing"] == "validated"


async def test_counts_of_many_claims_in_one_request_say_which_were_missing(api: Api):
    claims = [random_claim_id() for _ in range(3)]
    last = 0
    for claim in claims:
        last = (await api.send("draft_claim", "ada", **draft(claim))).json()["last_seq"]
    missing = random_claim_id()
    response = await api.http.post("/claims/counts", json={"claim_ids": [*claims, missing]}, params={"after": last})
    body = response.json()
    assert sorted(body["counts"]) == sorted(claims) and body["missing"] == [missing]
    too_many = await api.http.post("/claims/counts", json={"claim_ids": [f"CLM-{n:05d}" for n in range(501)]})
    assert too_many.status_code == 422


async def test_the_scorecard_counts_by_standing_and_leaves_unreviewed_model_drafts_out(api: Api):
    capability = f"Capability {random_claim_id()}"
    claims = {name: random_claim_id() for name in ("validated", "refuted", "model draft", "reviewed draft", "retracted")}
    for name, claim in claims.items():
        who = "drafter" if "draft" in name else "ada"
        await api.send("draft_claim", who, **{**draft(claim), "capability": capability, "technique": "Planning first"})
    await api.send("attach_source", "bot", claim_id=claims["validated"], source_id="s", relation="validates", measured="x")
    await api.send("attach_source", "bot", claim_id=claims["refuted"], source_id="s", relation="contradicts", measured="x")
    await api.send("attach_source", "bot", claim_id=claims["model draft"], source_id="s", relation="validates", measured="x")
    await api.send("record_review", "grace", claim_id=claims["reviewed draft"], review_id="r", verdict="sound", confidence="low", revision=1)
    last = (await api.send("retract_claim", "ada", claim_id=claims["retracted"], reason="Contaminated.")).json()["last_seq"]

    card = (await api.http.get(f"/scorecard/{capability}", params={"after": last})).json()
    [score] = card["capabilities"]
    assert card["rules_version"] == 2 and card["applied_seq"] >= last
    assert score["by_standing"] == {"validated": 1, "supported": 0, "contested": 0, "refuted": 1, "untested": 1}
    assert score["claims_counted"] == 3 and score["unreviewed_model_drafts_left_out"] == 1
    assert score["techniques"][0]["technique"] == "Planning first" and score["techniques"][0]["claims_counted"] == 3
    everything = (await api.http.get("/scorecard")).json()
    assert capability in [c["capability"] for c in everything["capabilities"]]
    assert (await api.http.get("/scorecard/No such capability")).status_code == 404


async def test_the_change_feed_serves_the_log_in_order_with_hashes_that_chain(api: Api):
    claim = random_claim_id()
    last = await history_with_everything(api, claim)
    events, after = [], 0
    while after < last:
        page = (await api.http.get("/events", params={"after": after, "limit": 4})).json()
        assert len(page["events"]) <= 4 and page["next_after"] > after
        events += page["events"]
        after = page["next_after"]
    assert [e["seq"] for e in events] == list(range(1, last + 1))
    ours = [e for e in events if e["event"]["claim_id"] == claim]
    assert ours[0]["event"]["type"] == "ClaimDrafted" and len(ours) == 11
    for before, event in zip(ours, ours[1:], strict=False):
        assert event["event"]["prev_hash"] == before["hash"]
    stored = await api.log.read_claim(claim)
    assert ours[-1]["hash"] == event_hash(stored[-1].data)
    idle = (await api.http.get("/events", params={"after": last})).json()
    assert idle == {"events": [], "next_after": last}


async def test_a_contributors_record_shows_what_they_brought_and_what_became_of_it(api: Api):
    claim, other = random_claim_id(), random_claim_id()
    await history_with_everything(api, claim)
    await api.send("draft_claim", "ada", **draft(other))
    last = (await api.send("attach_source", "bot", claim_id=other, source_id="s9", relation="mentions", measured="M.")).json()["last_seq"]

    bot = (await api.http.get("/contributors/source-bot", params={"after": last})).json()
    assert bot["kinds"] == ["service"] and bot["claims_drafted"] == 0
    # s2 was corrected to "qualifies" by ada; s3 was withdrawn: both still the bot's.
    assert bot["sources_brought"] == {"validates": 1, "supports": 0, "contradicts": 0, "qualifies": 1, "mentions": 1}
    assert (bot["sources_withdrawn"], bot["sources_corrected"]) == (1, 1)
    grace = (await api.http.get("/contributors/grace")).json()
    assert grace["disagreements"] == {"filed": 2, "open": 1, "upheld": 0, "rejected": 1, "withdrawn": 0}
    assert grace["reviews_given"] == 1
    drafter = (await api.http.get("/contributors/drafter")).json()
    assert drafter["models"] == ["drafter-2"] and drafter["claims_drafted"] == 1 and drafter["reviews_given"] == 0
    assert (await api.http.get("/contributors/critic")).json()["reviews_given"] == 1

    first = (await api.http.get("/contributors/source-bot", params={"limit": 2})).json()
    older = (await api.http.get("/contributors/source-bot", params={"limit": 2, "before": first["next_before"]})).json()
    lines = first["activity"] + older["activity"]
    assert [a["seq"] for a in lines] == sorted((a["seq"] for a in lines), reverse=True) and len(lines) == 4
    assert lines[0] == {**lines[0], "claim_id": other, "event_type": "SourceAttached", "subject_id": "s9"}
    assert (await api.http.get("/contributors/nobody")).status_code == 404
