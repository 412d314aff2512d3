"""Commands over HTTP against a real nats-server and a running projector, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from sqlalchemy import Engine

from events import Actor, new_event_id
from events.claim import ClaimDrafted
from events.envelope import utc_now
from events.review import ReviewRecorded
from services.commands import Rejected, parse_command
from services.commands.service import CommandService, idempotent_event_id
from services.http.app import create_app
from tests.conftest import random_claim_id
from tests.integration.command_api import ACTORS, Api, draft


async def test_every_command_shows_its_effect_on_the_claim_page(api: Api):
    claim, other = random_claim_id(), random_claim_id()
    assert (await api.send("draft_claim", "grace", **draft(claim))).status_code == 201
    assert (await api.send("draft_claim", "ada", **draft(other))).status_code == 201
    steps = [
        ("revise_claim", "ada", {"statement": "Planning before acting helps.", "falsifier": "No effect at scale."}),
        ("attach_source", "bot", {"source_id": "s1", "relation": "supports", "measured": "Accuracy +4 points."}),
        ("attach_source", "bot", {"source_id": "s2", "relation": "contradicts", "measured": "No gain."}),
        ("correct_source", "ada", {"source_id": "s1", "measured": "Accuracy +3 points.", "reason": "Typo."}),
        ("withdraw_source", "bot", {"source_id": "s2", "reason": "Wrong paper."}),
        ("file_disagreement", "grace", {"disagreement_id": "d1", "argument": "Too small a benchmark.", "source_id": "s1"}),
        ("answer_disagreement", "ada", {"disagreement_id": "d1", "answer": "A larger run is planned."}),
        ("resolve_disagreement", "grace", {"disagreement_id": "d1", "outcome": "upheld"}),
        ("record_review", "drafter", {"review_id": "r1", "verdict": "sound", "confidence": "medium", "revision": 2}),
        ("record_review", "ada", {"review_id": "r2", "verdict": "unsound", "confidence": "high", "revision": 1}),
        ("withdraw_review", "ada", {"review_id": "r2", "reason": "Reviewed the wrong revision."}),
        ("relate_claims", "ada", {"related_claim_id": other, "rank": 1}),
        ("relate_claims", "ada", {"statement": "A claim without a page yet.", "capability": "Planning"}),
        ("unrelate_claims", "ada", {"related_key": other}),
        ("retract_claim", "ada", {"reason": "The benchmark was contaminated."}),
    ]
    last = 0
    for command, who, body in steps:
        response = await api.send(command, who, claim_id=claim, **body)
        assert response.status_code == 201, (command, response.text)
        result = response.json()
        assert result["last_seq"] > last and result["events"][0]["seq"] == result["last_seq"]
        assert response.headers["etag"] == f'"{result["last_seq"]}"'
        last = result["last_seq"]
    assert (await api.send("supersede_claim", "ada", claim_id=other, superseded_by=claim)).status_code == 201

    page = await api.page(claim, after=last)
    assert page["statement"] == "Planning before acting helps." and page["revision"] == 2
    assert page["notes"]["falsifier_as_drafted"] == "A replication that finds no effect."
    assert page["notes"]["falsifier_now"] == "No effect at scale."
    sources = {s["source_id"]: s for s in page["sources"]}
    assert sources["s1"]["measured"] == "Accuracy +3 points." and sources["s1"]["brought"]["by"]["id"] == "source-bot"
    assert sources["s1"]["corrections"][0]["stamp"]["by"]["id"] == "ada"
    assert sources["s2"]["state"] == "withdrawn" and sources["s2"]["withdrawn"]["reason"] == "Wrong paper."
    [disagreement] = page["disagreements"]
    assert disagreement["state"] == "resolved" and disagreement["outcome"] == "upheld"
    assert disagreement["filed"]["by"]["id"] == "grace" and disagreement["answers"][0]["stamp"]["by"]["id"] == "ada"
    reviews = {r["review_id"]: r for r in page["reviews"]}
    assert reviews["r1"]["reviewer_kind"] == "ai" and reviews["r1"]["recorded"]["by"]["model"] == "drafter-2"
    assert reviews["r2"]["reviewer_kind"] == "person" and reviews["r2"]["state"] == "withdrawn"
    assert [r["statement"] for r in page["related"]] == ["A claim without a page yet."]
    assert page["status"]["lifecycle"] == "retracted"
    assert page["counts"]["sources_by_relation"]["supports"] == 1 and page["counts"]["sources_withdrawn"] == 1
    assert page["counts"]["reviews_ai"] == 1 and page["counts"]["reviews_person"] == 0
    superseded = await api.page(other, after=last + 1)
    assert superseded["status"]["lifecycle"] == "superseded" and superseded["status"]["superseded_by"] == claim


async def test_a_write_without_a_valid_token_is_refused_and_publishes_nothing(api: Api):
    claim = random_claim_id()
    head = await api.log.head()
    missing = await api.send("draft_claim", None, **draft(claim))
    assert missing.status_code == 401 and missing.headers["www-authenticate"].startswith("Bearer")
    forged = await api.http.post("/commands/draft_claim", json=draft(claim), headers={"Authorization": "Bearer clm_forged"})
    assert forged.status_code == 401 and forged.json()["error"] == "unauthorized"
    assert [record.actor.id for record in await api.store.revoke(actor_id="grace")] == ["grace"]
    revoked = await api.send("draft_claim", "grace", **draft(claim))
    assert revoked.status_code == 401 and "revoked" in revoked.json()["message"]
    assert await api.log.head() == head


async def test_the_actor_comes_from_the_token_not_the_body(api: Api):
    claim = random_claim_id()
    forged = await api.send("draft_claim", "ada", **draft(claim), actor={"id": "someone-else", "kind": "person"})
    assert forged.status_code == 422 and "actor" in forged.json()["message"]
    created = await api.send("draft_claim", "ada", **draft(claim))
    page = await api.page(claim, after=created.json()["last_seq"])
    assert page["notes"]["drafted"]["by"] == {"id": "ada", "kind": "person", "model": None}


async def test_a_command_sent_twice_with_one_idempotency_key_adds_one_event(api: Api):
    claim = random_claim_id()
    await api.send("draft_claim", "ada", **draft(claim))
    key = {"Idempotency-Key": "attach-s1-once"}
    body = {"claim_id": claim, "source_id": "s1", "relation": "supports", "measured": "+4."}
    first = await api.send("attach_source", "bot", headers=key, **body)
    head = await api.log.head()
    again = await api.send("attach_source", "bot", headers=key, **body)
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["duplicate"] is True and again.json()["events"] == first.json()["events"]
    assert await api.log.head() == head
    misuse = await api.send("withdraw_source", "bot", headers=key, claim_id=claim, source_id="s1", reason="x")
    assert misuse.status_code == 422 and misuse.json()["error"] == "idempotency_key_reused"
    assert len((await api.page(claim, after=head))["sources"]) == 1


async def test_an_idempotency_key_names_one_command_of_one_actor_on_one_claim(api: Api):
    claim, other = random_claim_id(), random_claim_id()
    for claim_id in (claim, other):
        await api.send("draft_claim", "ada", **draft(claim_id))
    key = {"Idempotency-Key": "attach-s1"}
    body = {"source_id": "s1", "relation": "supports", "measured": "+4."}
    first = await api.send("attach_source", "bot", headers=key, claim_id=claim, **body)
    elsewhere = await api.send("attach_source", "bot", headers=key, claim_id=other, **body)
    assert (first.status_code, elsewhere.status_code) == (201, 201), elsewhere.text
    assert elsewhere.json()["claim_id"] == other and elsewhere.json()["events"][0]["seq"] > first.json()["events"][0]["seq"]
    assert [s.event.type for s in await api.log.read_claim(other)] == ["ClaimDrafted", "SourceAttached"]
    changed = await api.send("attach_source", "bot", headers=key, claim_id=claim, **{**body, "measured": "+5."})
    assert changed.status_code == 422 and changed.json()["error"] == "idempotency_key_reused"
    assert "measured" in changed.json()["message"]
    # The same key of another actor is another command.
    theirs = await api.send("attach_source", "ada", headers=key, claim_id=claim, **{**body, "source_id": "s2"})
    assert theirs.status_code == 201, theirs.text


async def test_an_event_id_another_writer_sent_first_blocks_nothing_of_yours(api: Api):
    claim = random_claim_id()
    await api.send("draft_claim", "ada", **draft(claim))
    key = {"Idempotency-Key": "ada-key-7"}
    # grace sends, as her own event id, the id ada's key will derive (the namespace is public).
    event_id = idempotent_event_id(ACTORS["ada"], claim, "ada-key-7")
    squatted = await api.send("file_disagreement", "grace", claim_id=claim, event_id=event_id, disagreement_id="d1", argument="Too small.")
    assert squatted.status_code == 201, squatted.text
    # ada's command with her key is her own event, stored and folded beside grace's.
    mine = await api.send("file_disagreement", "ada", headers=key, claim_id=claim, disagreement_id="d2", argument="Wrong split.")
    assert mine.status_code == 201 and mine.json()["duplicate"] is False, mine.text
    assert mine.json()["events"][0]["event_id"] == event_id
    # Each writer's repeat of its own id is still a duplicate, answered with its own event.
    head = await api.log.head()
    again = await api.send("file_disagreement", "ada", headers=key, claim_id=claim, disagreement_id="d2", argument="Wrong split.")
    assert again.status_code == 200 and again.json()["duplicate"] is True and again.json()["events"] == mine.json()["events"]
    theirs = await api.send("file_disagreement", "grace", claim_id=claim, event_id=event_id, disagreement_id="d1", argument="Too small.")
    assert theirs.status_code == 200 and theirs.json()["events"] == squatted.json()["events"]
    assert await api.log.head() == head
    page = await api.page(claim, after=mine.json()["last_seq"])
    filed = {d["disagreement_id"]: d["filed"]["by"]["id"] for d in page["disagreements"]}
    assert filed == {"d1": "grace", "d2": "ada"}, page["disagreements"]


async def test_a_claim_related_to_itself_is_refused_as_invalid(api: Api):
    claim = random_claim_id()
    await api.send("draft_claim", "ada", **draft(claim))
    response = await api.send("relate_claims", "ada", claim_id=claim, related_claim_id=claim)
    assert (response.status_code, response.json()["error"]) == (422, "related_to_itself"), response.text


async def test_a_slug_belongs_to_the_first_claim_that_took_it(api: Api):
    first, second, third = random_claim_id(), random_claim_id(), random_claim_id()
    slug = f"taken-{first.lower()}"
    created = await api.send("draft_claim", "ada", **{**draft(first), "slug": slug})
    assert created.status_code == 201
    head = await api.log.head()
    hijack = await api.send("draft_claim", "grace", **{**draft(second), "slug": slug})
    assert (hijack.status_code, hijack.json()["error"]) == (409, "slug_taken"), hijack.text
    assert first in hijack.json()["message"] and await api.log.head() == head
    # A draft refused for another reason gives its slug back.
    fresh = f"fresh-{second.lower()}"
    exists = await api.send("draft_claim", "ada", **{**draft(first), "slug": fresh})
    assert exists.json()["error"] == "claim_exists"
    assert (await api.send("draft_claim", "grace", **{**draft(second), "slug": fresh})).status_code == 201
    # Racing drafts of one slug in two command services (two API processes): one wins.
    racer = CommandService(api.log)
    racing = await asyncio.gather(
        api.send("draft_claim", "ada", **{**draft(third), "slug": f"race-{third.lower()}"}),
        racer.execute(parse_command({"command": "draft_claim", **draft(first), "claim_id": random_claim_id(),
                                     "slug": f"race-{third.lower()}"}), ACTORS["grace"]),
        return_exceptions=True,
    )
    outcomes = sorted("refused" if isinstance(r, Rejected) or getattr(r, "status_code", 0) == 409 else "stored" for r in racing)
    assert outcomes == ["refused", "stored"], racing


async def test_the_first_claim_keeps_its_slug_when_a_direct_producer_drafts_another_with_it(api: Api):
    first, second = random_claim_id(), random_claim_id()
    slug = f"kept-{first.lower()}"
    await api.send("draft_claim", "ada", **{**draft(first), "slug": slug})
    fields = {k: v for k, v in draft(second).items() if k != "claim_id"}
    squat = ClaimDrafted(event_id=new_event_id(), occurred_at=utc_now(), actor=ACTORS["grace"], claim_id=second,
                         **{**fields, "slug": slug, "statement": "Someone else's claim."})
    stored = await api.log.append(second, [squat], expected_seq=0, prev_hash=None)
    # The first claim's row written again after the second's (PostgreSQL then stores it after it).
    later = await api.send("attach_source", "bot", claim_id=first, source_id="s1", relation="supports", measured="x")
    by_slug = await api.http.get(f"/claims/{slug}", params={"after": later.json()["last_seq"]})
    assert by_slug.status_code == 200 and by_slug.json()["claim_id"] == first
    assert (await api.http.get(f"/claims/{slug}/counts")).json()["claim_id"] == first
    assert (await api.http.get(f"/pages/claims/{slug}")).status_code == 200
    assert first in (await api.http.get(f"/pages/claims/{slug}")).text
    assert (await api.page(second, after=stored.last_seq))["statement"] == "Someone else's claim."


async def test_a_model_draft_counts_only_once_someone_other_than_its_model_reviewed_it(api: Api):
    claim = random_claim_id()
    drafted = await api.send("draft_claim", "drafter", **draft(claim))
    review = {"claim_id": claim, "verdict": "sound", "confidence": "high", "revision": 1}
    own = await api.send("record_review", "drafter", review_id="r1", **review)
    assert (own.status_code, own.json()["error"]) == (403, "own_draft")
    # A direct producer writing the same model's review around the API: the page does not fold it.
    twin = Actor(id="drafter-twin", kind="model", model="drafter-2")
    forged = ReviewRecorded(event_id=new_event_id(), occurred_at=utc_now(), actor=twin, claim_id=claim, review_id="r2",
                            reviewer_kind="ai", verdict="sound", confidence="high", revision=1)
    head = drafted.json()["last_seq"]
    stored = await api.log.append(claim, [forged], expected_seq=head, prev_hash=(await api.log.claim_head(claim)).hash)
    page = await api.page(claim, after=stored.last_seq)
    assert page["reviews"] == [] and page["status"]["unreviewed_model_draft"] is True
    assert page["status"]["counts_toward_scorecard"] is False
    counted = await api.send("record_review", "ada", review_id="r3", **review)
    page = await api.page(claim, after=counted.json()["last_seq"])
    assert [r["review_id"] for r in page["reviews"]] == ["r3"] and page["status"]["counts_toward_scorecard"] is True


async def test_two_writers_racing_on_one_version_end_with_one_success_and_one_409(api: Api):
    claim = random_claim_id()
    version = (await api.send("draft_claim", "ada", **draft(claim))).json()["last_seq"]
    etag = (await api.http.get(f"/claims/{claim}", params={"after": version})).headers["etag"]
    racing = [
        api.send("attach_source", who, headers={"If-Match": etag}, claim_id=claim, source_id=f"s-{who}", relation="supports", measured="x")
        for who in ("ada", "grace")
    ]
    statuses = sorted(r.status_code for r in await asyncio.gather(*racing))
    assert statuses == [201, 409]
    stale = await api.send("attach_source", "ada", headers={"If-Match": etag}, claim_id=claim, source_id="late", relation="supports", measured="x")
    assert stale.status_code == 409 and stale.json()["error"] == "stale_version"
    assert len(await api.log.read_claim(claim)) == 2


@pytest.mark.parametrize(
    ("command", "who", "body", "status", "reason"),
    [
        ("attach_source", "bot", {"claim_id": "CLM-00000001", "source_id": "s", "relation": "supports", "measured": "x"}, 404, "claim_not_found"),
        ("resolve_disagreement", "ada", {"disagreement_id": "d-resolved", "outcome": "rejected"}, 409, "disagreement_resolved"),
        ("answer_disagreement", "ada", {"disagreement_id": "nope", "answer": "x"}, 404, "disagreement_not_found"),
        ("record_review", "grace", {"review_id": "r9", "verdict": "sound", "confidence": "low", "revision": 7}, 422, "revision_not_found"),
        ("record_review", "bot", {"review_id": "r9", "verdict": "sound", "confidence": "low", "revision": 1}, 403, "reviewer_not_allowed"),
        ("record_review", "ada", {"review_id": "r9", "verdict": "sound", "confidence": "low", "revision": 1}, 403, "own_draft"),
        ("withdraw_source", "ada", {"source_id": "missing", "reason": "x"}, 404, "source_not_found"),
        ("attach_source", "bot", {"source_id": "s1", "relation": "supports", "measured": "again"}, 409, "source_exists"),
        ("revise_claim", "ada", {"reason": "changes nothing"}, 422, "invalid_request"),
        ("attach_source", "bot", {"source_id": "s", "relation": "proves", "measured": "x"}, 422, "invalid_request"),
        ("relate_claims", "ada", {"related_claim_id": "CLM-00000002"}, 404, "claim_not_found"),
    ],
)
async def test_a_command_that_does_not_apply_is_refused_with_a_reason_and_publishes_nothing(api: Api, command, who, body, status, reason):
    claim = random_claim_id()
    await api.send("draft_claim", "ada", **draft(claim))
    await api.send("attach_source", "bot", claim_id=claim, source_id="s1", relation="supports", measured="x")
    await api.send("file_disagreement", "grace", claim_id=claim, disagreement_id="d-resolved", argument="x")
    await api.send("resolve_disagreement", "grace", claim_id=claim, disagreement_id="d-resolved", outcome="upheld")
    head = await api.log.head()
    response = await api.send(command, who, **{"claim_id": claim, **body})
    assert (response.status_code, response.json()["error"]) == (status, reason), response.text
    assert response.json()["message"]
    assert await api.log.head() == head


async def test_a_retracted_claim_takes_no_new_evidence(api: Api):
    claim = random_claim_id()
    await api.send("draft_claim", "ada", **draft(claim))
    await api.send("retract_claim", "ada", claim_id=claim, reason="Contaminated.")
    response = await api.send("attach_source", "bot", claim_id=claim, source_id="s", relation="supports", measured="x")
    assert (response.status_code, response.json()["error"]) == (409, "claim_retracted")


async def test_the_generic_route_takes_any_command_by_name(api: Api):
    claim = random_claim_id()
    response = await api.http.post(
        "/commands", json={"command": "draft_claim", **draft(claim)}, headers={"Authorization": f"Bearer {api.tokens['ada']}"}
    )
    assert response.status_code == 201 and response.json()["command"] == "draft_claim"


async def test_a_read_after_a_sequence_not_yet_applied_says_so_within_its_wait(api: Api, engine: Engine):
    app = create_app(engine, read_wait=0.2)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://claimlog") as http:
        response = await http.get("/claims", headers={"Claimlog-After": str(10**9)})
    assert response.status_code == 503 and response.json()["error"] == "not_yet_visible"
    assert response.headers["retry-after"] == "1"


async def test_the_asyncapi_document_of_the_claim_subjects_is_served_next_to_openapi(api: Api):
    document = (await api.http.get("/asyncapi.json")).json()
    assert document["asyncapi"] == "3.0.0"
    assert document["channels"]["SourceAttached"]["address"] == "claims.{claim_id}.SourceAttached"
    page = await api.http.get("/asyncapi")
    assert page.status_code == 200 and "claimlog events" in page.text
    assert "/commands/attach_source" in (await api.http.get("/openapi.json")).json()["paths"]


async def test_two_command_services_on_one_claim_never_decide_on_a_stale_state(claim_log):
    from events import Actor
    from services.commands import CommandService, Rejected, parse_command

    ada = Actor(id="ada", kind="person")
    first, second = CommandService(claim_log), CommandService(claim_log)
    claim = random_claim_id()

    async def run(service, **body):
        return await service.execute(parse_command({"claim_id": claim, **body}), ada)

    await run(first, command="draft_claim", **{k: v for k, v in draft(claim).items() if k != "claim_id"})
    await run(first, command="attach_source", source_id="s1", relation="supports", measured="x")
    # The second service moves the claim on; the first still holds its older state in memory.
    await run(second, command="attach_source", source_id="s2", relation="supports", measured="y")
    await run(second, command="withdraw_source", source_id="s1", reason="Wrong paper.")
    corrected = await run(first, command="correct_source", source_id="s2", measured="y, corrected")
    assert corrected.events[0].seq == await claim_log.head()  # s2 was found, though the cache had not seen it
    with pytest.raises(Rejected) as refused:
        await run(first, command="correct_source", source_id="s1", measured="x, corrected")
    assert refused.value.reason == "source_withdrawn"
    assert [s.event.type for s in await claim_log.read_claim(claim)][-1] == "SourceCorrected"
