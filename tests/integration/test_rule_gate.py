"""The rules the command side applies hold for events written around it: an event a producer's credential
and key publish straight to the log that breaks one (a review of a revision the claim never had, or by a
service; a withdrawal of a source it does not have; an act on a retracted claim) is refused by the gate
with the rule, alike by the projector, the as-of pages, the past scorecard, history, the write side and
``verify``; events/rules.py, services/admission/in_order.py."""

from __future__ import annotations

from sqlalchemy import Engine, select

from events import Actor
from events.relation import ClaimsUnrelated
from projections.tables import unreadable_events
from services.audit.rebuild import compare_read_models
from services.audit.verify import Report
from services.identity.keys import KeyRing
from services.log import ClaimLog, StreamSpec
from tests.builders import answered, attached, drafted, reviewed, withdrawn
from tests.builders.raw import publish_raw
from tests.conftest import random_claim_id
from tests.integration.command_api import ACTORS, Api, draft, running_api

API_ACTOR = Actor(id="claimlog-api", kind="service")
# Producers that sign for themselves (the API, which signs for the others, may not sign for them).
GRACE, BOT = ACTORS["grace"], ACTORS["bot"]
CRITIC = Actor(id="raw-critic", kind="model", model="raw-critic-1")


async def _standing(api: Api, claim: str, after: int) -> tuple[dict, list]:
    """The claim's page and its capability's scorecard rows, once the projector has passed ``after``."""
    page = await api.page(claim, after=after)
    card = (await api.http.get("/scorecard", params={"after": after})).json()
    return page, [c for c in card["capabilities"] if c["capability"] == page["capability"]]


async def test_events_against_the_rules_written_around_the_api_are_refused_by_every_reader(claim_log: ClaimLog, engine: Engine):
    ring = await KeyRing.open(claim_log.nc, stream=claim_log.stream)
    delegate, _ = await ring.add(API_ACTOR, delegate=True)
    keys = {actor.id: (await ring.add(actor))[0] for actor in (GRACE, CRITIC, BOT)}  # producers' own keys
    await ring.require(await claim_log.head())
    signed = ClaimLog(claim_log.nc, StreamSpec("CLAIMS"), signer=delegate)
    async for api in running_api(signed, engine):
        claim, closed = random_claim_id(), random_claim_id()
        assert (await api.send("draft_claim", "drafter", **draft(claim))).status_code == 201  # a model draft
        sent = await api.send("attach_source", "ada", claim_id=claim, source_id="s1", relation="validates", measured="x")
        assert sent.status_code == 201, sent.text
        assert (await api.send("draft_claim", "ada", **{**draft(closed), "slug": f"closed-{closed.lower()}"})).status_code == 201
        sent = await api.send("retract_claim", "ada", claim_id=closed, reason="Wrong benchmark.")
        assert sent.status_code == 201, sent.text
        before, card_before = await _standing(api, claim, sent.json()["last_seq"])
        closed_before = await api.page(closed, after=sent.json()["last_seq"])

        breaking = [  # (claim, event, what its refusal says), each signed by its actor's own key
            (claim, reviewed(claim, "r-huge", "ai", actor=CRITIC, revision=2**70), f"revision {2**70} does not exist: the claim is at revision 1"),
            (claim, reviewed(claim, "r-ahead", actor=GRACE, revision=2), "revision 2 does not exist"),
            (claim, reviewed(claim, "r-bot", actor=BOT), "reviews are by a person or an AI model, not by a service"),
            (claim, reviewed(claim, "r-lie", "person", actor=CRITIC), "has reviewer_kind 'ai', not 'person'"),
            (claim, withdrawn(claim, "s9", actor=GRACE), f"{claim} has no source 's9'"),
            (claim, answered(claim, "d9", actor=GRACE), f"{claim} has no disagreement 'd9'"),
            (claim, attached(claim, "s1", actor=BOT, measured="replaced"), f"{claim} already has a source 's1'"),
            (claim, drafted(claim, actor=GRACE, statement="Another claim altogether."), f"{claim} is already drafted"),
            (claim, ClaimsUnrelated(**reviewed(claim, actor=GRACE).model_dump(include={"event_id", "claim_id", "occurred_at", "actor"}),
                                    related_key="CLM-0009"), f"{claim} is not related to CLM-0009"),
            (closed, attached(closed, "s2", actor=GRACE), f"{closed} is retracted: it cannot take SourceAttached"),
            (closed, reviewed(closed, "r1", actor=GRACE), f"{closed} is retracted: it cannot take ReviewRecorded"),
        ]
        said = {}
        for on, event, why in breaking:
            said[await publish_raw(signed, on, event, signer=keys[event.actor.id])] = why
        head = max(said)

        # The projector folds none of them: the pages and the scorecard stand as they stood.
        after, card_after = await _standing(api, claim, head)
        assert after == before and card_after == card_before
        assert await api.page(closed, after=head) == closed_before
        with engine.connect() as conn:
            rows = dict(conn.execute(select(unreadable_events.c.seq, unreadable_events.c.reason).where(unreadable_events.c.seq.in_(said))).all())
        assert sorted(rows) == sorted(said)
        for seq, why in said.items():
            assert rows[seq].startswith("against the rules: ") and why in rows[seq], (seq, rows[seq])

        # Past pages and the past scorecard refuse them too.
        for on, page in ((claim, before), (closed, closed_before)):
            past = (await api.http.get(f"/claims/{on}", params={"as_of_seq": head})).json()
            assert {k: past[k] for k in ("sources", "reviews", "disagreements", "revision", "status", "event_count")} == {
                k: page[k] for k in ("sources", "reviews", "disagreements", "revision", "status", "event_count")
            }
        past_card = (await api.http.get("/scorecard", params={"as_of_seq": head})).json()
        assert [c for c in past_card["capabilities"] if c["capability"] == before["capability"]] == card_before

        # History lists each as refused, with its rule, never as its actor's act.
        entries = {}
        for on in (claim, closed):
            entries |= {e["seq"]: e for e in (await api.http.get(f"/claims/{on}/history")).json()["events"]}
        for seq, why in said.items():
            assert entries[seq]["actor"] is None and why in entries[seq]["unreadable"], entries[seq]

        # verify names each, by the rule it breaks.
        report = Report()
        await compare_read_models(signed, engine, report)
        found = {f.seq: f for f in report.findings if f.kind == "rule"}
        assert sorted(found) == sorted(said) and "table" not in report.counts, report.findings
        assert all(why in found[seq].message and found[seq].claim_id in (claim, closed) for seq, why in said.items())

        # The write side decides as if they were not there: their ids are free, and nothing they named exists.
        sent = await api.send("record_review", "critic", claim_id=claim, review_id="r-bot", verdict="sound", confidence="high", revision=1)
        assert sent.status_code == 201, sent.text
        missing = await api.send("withdraw_source", "ada", claim_id=claim, source_id="s9", reason="Not there.")
        assert missing.status_code == 404 and missing.json()["error"] == "source_not_found", missing.text
        page = await api.page(claim, after=sent.json()["last_seq"])
        assert [(r["review_id"], r["reviewer_kind"], r["recorded"]["by"]["id"]) for r in page["reviews"]] == [("r-bot", "ai", "critic")]
        assert [s["measured"] for s in page["sources"]] == ["x"] and page["statement"] == before["statement"]
        assert page["status"]["counts_toward_scorecard"]  # reviewed by another model now: the refused reviews never counted
