"""A claim page written as the registry's text and imported into a fresh registry is the same page.

The text names no ids and no times, and says who wrote each part but not who appended it; so the page
imported from it differs from the original only there: the ids of its disagreements and reviews (an import
derives them from what the page says), every time and log sequence, and who appended the disagreements
and reviews (the importer, ``claimlog-ingest``, with the page and whom the page names). A source says who
brought it when that is known, so it moves with whom it names too; its id is derived from what the page says.
"""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from nats import connect
from sqlalchemy import Engine

from events import Actor
from events.subjects import LogLayout
from services.http import create_app
from services.ingest.importer import PAGE_IMPORTER, source_id
from services.ingest.page_format import parse_page
from services.ingest.pages import import_page, read_page, sample_pages
from services.log import ClaimLog
from services.log.stream import StreamSpec
from tests.builders import answered, filed, resolved, review_withdrawn, reviewed
from tests.conftest import random_claim_id
from tests.integration.command_api import ACTORS, Api, draft
from tests.integration.test_as_of import send_all
from tests.integration.test_projector import append_history, project_all

CLAIM = "CLM-0631"
ALICE, CAROL = Actor(id="alice", kind="person"), Actor(id="carol", kind="person")
JUDGE = Actor(id="reviewer-7", kind="model", model="judge model 2")


def _who(value: Any) -> Any:
    """The page with every stamp reduced to who the page names, and the ids and times that cannot survive left out."""
    if isinstance(value, list):
        return [_who(item) for item in value]
    if not isinstance(value, dict):
        return value
    if {"by", "at", "seq"} <= value.keys():
        return value.get("written_by") or value["by"]
    return {k: _who(v) for k, v in value.items() if k not in ("disagreement_id", "review_id", "as_of_seq", "as_of_time")}


async def _imported_into_a_fresh_registry(claim_log: ClaimLog, nats_url: str, text: str, path: str, engine: Engine) -> None:
    nc = await connect(nats_url)
    try:
        fresh = ClaimLog(nc, StreamSpec("FRESH", layout=LogLayout("fresh", claim_log.layout.partitions)))
        await fresh.ensure()
        await import_page(fresh, parse_page(text, path))
        await project_all(fresh, engine)
    finally:
        await nc.close()


async def test_a_source_attached_through_the_api_keeps_who_brought_it_when_its_page_moves(
    api: Api, replay_engine: Engine, nats_url: str
):
    claim = random_claim_id()
    api.tokens["alice"] = (await api.store.issue(ALICE))[0]
    refused = await api.send("attach_source", "alice", claim_id=claim, source_id="s0", relation="supports",
                             measured="Anything.", written_by=CAROL.model_dump(mode="json"))
    assert refused.status_code == 422 and "written_by" in refused.text  # a command is its own actor's word
    last = await send_all(api, claim, [
        ("draft_claim", "drafter", {k: v for k, v in draft(claim).items() if k != "claim_id"}),
        ("attach_source", "alice", {"source_id": "s1", "relation": "validates", "measured": "Accuracy on GSM8K.",
                                    "breadth": "one seed"}),
        ("attach_source", "bot", {"source_id": "s2", "relation": "contradicts", "measured": "No effect on MATH."}),
        ("file_disagreement", "grace", {"disagreement_id": "d1", "argument": "Two backbones are too few.",
                                        "source_id": "s1"}),
        ("answer_disagreement", "ada", {"disagreement_id": "d1", "answer": "A third is in the appendix."}),
        ("resolve_disagreement", "grace", {"disagreement_id": "d1", "outcome": "withdrawn", "note": "Fair."}),
        ("record_review", "grace", {"review_id": "r1", "verdict": "sound", "confidence": "high", "revision": 1}),
        ("record_review", "critic", {"review_id": "r2", "verdict": "unsound", "confidence": "low", "revision": 1}),
        ("withdraw_review", "critic", {"review_id": "r2", "reason": "Read the wrong table."}),
    ])
    text = (await api.http.get(f"/claims/{claim}/text", params={"after": last})).text
    assert "- Validated by: Accuracy on GSM8K.. Measured: one seed\n  Brought by alice (person).\n" in text
    assert "\n  Brought by source-bot (service).\nDisagreements\n- Filed by grace (person) about source 1:" in text

    await _imported_into_a_fresh_registry(api.log, nats_url, text, f"{claim}.txt", replay_engine)
    imported = TestClient(create_app(replay_engine))
    assert imported.get(f"/claims/{claim}/text").text == text
    page = imported.get(f"/claims/{claim}").json()
    brought = [s["brought"] for s in page["sources"]]
    assert [b["written_by"] for b in brought] == [ALICE.model_dump(mode="json"), ACTORS["bot"].model_dump(mode="json")]
    assert {(b["by"]["id"], b["imported_from"]) for b in brought} == {("claimlog-ingest", f"{claim}.txt")}
    assert page["disagreements"][0]["source_id"] == page["sources"][0]["source_id"]
    assert [r["recorded"]["written_by"]["id"] for r in page["reviews"]] == ["grace", "critic"]
    html = imported.get(f"/pages/claims/{claim}").text
    assert (f'Brought by <span class="who">alice (person)</span>, as {claim}.txt says; imported by '
            '<span class="who">claimlog-ingest (service)</span>') in html
    assert "not stated" not in html


async def test_a_page_with_every_section_round_trips_through_its_text(claim_log: ClaimLog, engine: Engine,
                                                                     replay_engine: Engine, nats_url: str):
    page = read_page(next(p for p in sample_pages() if p.stem == CLAIM))
    await import_page(claim_log, page)
    about = source_id(CLAIM, page.sources[0])
    await append_history(claim_log, CLAIM, [
        filed(CLAIM, "d1", ALICE, argument="Joint training had half the steps.\nSee the appendix.", source_id=about,
              evidence="Table 7"),
        answered(CLAIM, "d1", JUDGE, answer="Both ran 300 steps."),
        resolved(CLAIM, "d1", "rejected", CAROL),
        filed(CLAIM, "d2", CAROL, argument="Only one harness topology was tested."),
        reviewed(CLAIM, "r1", "person", CAROL, summary="Holds at 3B only."),
        reviewed(CLAIM, "r2", "ai", JUDGE, verdict="unsound", confidence="low"),
        review_withdrawn(CLAIM, "r2", JUDGE),
    ])
    await project_all(claim_log, engine)
    original = TestClient(create_app(engine))
    text = original.get(f"/claims/{CLAIM}/text").text
    assert "\nDisagreements\n- Filed by alice (person) about source 1: Joint training" in text
    assert "\n  Withdrawn by reviewer-7 (model: judge model 2): Reviewed the wrong claim.\n" in text

    nc = await connect(nats_url)
    try:
        fresh = ClaimLog(nc, StreamSpec("FRESH", layout=LogLayout("fresh", claim_log.layout.partitions)))
        await fresh.ensure()
        await import_page(fresh, parse_page(text, f"{CLAIM}.txt"))
        await project_all(fresh, replay_engine)
    finally:
        await nc.close()
    imported = TestClient(create_app(replay_engine))
    before, after = original.get(f"/claims/{CLAIM}").json(), imported.get(f"/claims/{CLAIM}").json()
    assert _who(after) == _who(before)
    assert imported.get(f"/claims/{CLAIM}/text").text == text
    # Who appended what the page says others wrote: the importer, with the page and whom it names.
    filed_by, answer = after["disagreements"][0]["filed"], after["disagreements"][0]["answers"][0]["stamp"]
    assert (filed_by["by"], filed_by["written_by"], filed_by["imported_from"]) == (
        PAGE_IMPORTER.model_dump(mode="json"), ALICE.model_dump(mode="json"), f"{CLAIM}.txt")
    assert (answer["by"]["id"], answer["written_by"]["model"]) == ("claimlog-ingest", "judge model 2")
    assert before["disagreements"][0]["filed"]["written_by"] is None  # filed in this registry, not imported
    assert after["status"]["review_state"] == before["status"]["review_state"] == "reviewed by a person"
    html = imported.get(f"/pages/claims/{CLAIM}").text
    assert "alice (person)</span>, as CLM-0631.txt says; imported by <span class=\"who\">claimlog-ingest" in html
