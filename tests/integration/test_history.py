"""A claim's history through the API and the CLI: every event in order, who acted, and what revisions changed."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime

from typer.testing import CliRunner

from services.cli import app as cli
from tests.conftest import random_claim_id
from tests.integration.command_api import Api, draft
from tests.integration.test_as_of import send_all

REVISED = "Planning before acting helps small models on math."


async def claim_with_revisions(api: Api) -> tuple[str, int]:
    claim = random_claim_id()
    last = await send_all(api, claim, [
        ("draft_claim", "drafter", {k: v for k, v in draft(claim).items() if k != "claim_id"}),
        ("attach_source", "bot", {"source_id": "s1", "relation": "supports", "measured": "Accuracy."}),
        ("revise_claim", "ada", {"statement": REVISED, "falsifier": "No effect on GSM8K.", "reason": "Narrower."}),
        ("correct_source", "grace", {"source_id": "s1", "relation": "validates", "citation": "Smith 2026"}),
        ("file_disagreement", "grace", {"disagreement_id": "d1", "argument": "Too small."}),
        ("revise_claim", "drafter", {"capability": "Reasoning"}),
    ])
    return claim, last


async def test_the_history_lists_every_event_with_its_actor_and_what_revisions_changed(api: Api):
    claim, last = await claim_with_revisions(api)
    response = await api.http.get(f"/claims/{claim}/history")
    assert response.status_code == 200, response.text
    body = response.json()
    events = body["events"]
    assert body["claim_id"] == claim and body["next_after_seq"] is None
    assert [e["type"] for e in events] == [
        "ClaimDrafted", "SourceAttached", "ClaimRevised", "SourceCorrected", "DisagreementFiled", "ClaimRevised",
    ]
    assert [e["seq"] for e in events] == sorted(e["seq"] for e in events) and events[-1]["seq"] == last
    assert events[0]["actor"] == {"id": "drafter", "kind": "model", "model": "drafter-2"}
    assert events[1]["actor"] == {"id": "source-bot", "kind": "service", "model": None}
    assert [e["revision"] for e in events] == [1, 1, 2, 2, 2, 3]
    page = await api.page(claim, after=last)
    assert datetime.fromisoformat(events[-1]["stored_at"]) == datetime.fromisoformat(page["as_of_time"])

    drafted = {c["field"]: (c["before"], c["after"]) for c in events[0]["diff"]}
    assert drafted["statement"] == (None, draft(claim)["statement"]) and drafted["revision"] == (None, 1)
    assert events[2]["diff"] == [
        {"field": "statement", "before": draft(claim)["statement"], "after": REVISED},
        {"field": "falsifier", "before": "A replication that finds no effect.", "after": "No effect on GSM8K."},
        {"field": "revision", "before": 1, "after": 2},
    ]
    assert events[3]["diff"] == [
        {"field": "sources.s1.relation", "before": "supports", "after": "validates"},
        {"field": "sources.s1.citation", "before": None, "after": "Smith 2026"},
    ]
    assert events[5]["diff"] == [
        {"field": "capability", "before": "Planning", "after": "Reasoning"},
        {"field": "revision", "before": 2, "after": 3},
    ]
    assert events[1]["diff"] is None and events[4]["diff"] is None
    assert (await api.http.get(f"/claims/{page['slug']}/history")).json() == body


async def test_the_history_filters_by_type_and_actor_kind_and_pages_and_always_shows_the_draft(api: Api):
    claim, last = await claim_with_revisions(api)
    url = f"/claims/{claim}/history"

    revisions = (await api.http.get(url, params={"type": "ClaimRevised"})).json()["events"]
    assert [e["type"] for e in revisions] == ["ClaimDrafted", "ClaimRevised", "ClaimRevised"]
    two_types = (await api.http.get(url, params=[("type", "SourceAttached"), ("type", "SourceCorrected")])).json()["events"]
    assert [e["type"] for e in two_types] == ["ClaimDrafted", "SourceAttached", "SourceCorrected"]
    by_people = (await api.http.get(url, params={"actor_kind": "person"})).json()["events"]
    assert [(e["type"], e["actor"]["id"]) for e in by_people] == [
        ("ClaimDrafted", "drafter"), ("ClaimRevised", "ada"), ("SourceCorrected", "grace"), ("DisagreementFiled", "grace"),
    ]
    by_models = (await api.http.get(url, params={"actor_kind": "model", "type": "ClaimRevised"})).json()["events"]
    assert [(e["type"], e["revision"]) for e in by_models] == [("ClaimDrafted", 1), ("ClaimRevised", 3)]

    seen, after = [], 0
    while True:
        body = (await api.http.get(url, params={"after_seq": after, "limit": 4})).json()
        seen += body["events"]
        assert len(body["events"]) <= 4
        if body["next_after_seq"] is None:
            break
        after = body["next_after_seq"]
    assert [e["seq"] for e in seen] == [e["seq"] for e in (await api.http.get(url)).json()["events"]]
    assert len(seen) == 6

    assert (await api.http.get(url, params={"type": "ClaimRenamed"})).status_code == 400
    assert (await api.http.get(url, params={"actor_kind": "robot"})).status_code == 422
    assert (await api.http.get(f"/claims/{random_claim_id()}/history")).status_code == 404
    assert (await api.http.get("/claims/no-such-slug/history")).status_code == 404


async def test_claimlog_history_prints_the_events_and_their_changes(api: Api, nats_url: str, database_url: str):
    claim, _ = await claim_with_revisions(api)
    env = {"CLAIMLOG_NATS_URL": nats_url, "CLAIMLOG_DATABASE_URL": database_url, "COLUMNS": "250"}
    runner = CliRunner()

    table = await asyncio.to_thread(runner.invoke, cli, ["history", claim], env=env)
    assert table.exit_code == 0, table.output
    assert "ClaimRevised" in table.stdout and "sources.s1.relation: 'supports' → 'validates'" in table.stdout
    assert "drafter (model: drafter-2)" in table.stdout
    as_json = await asyncio.to_thread(runner.invoke, cli, ["history", claim, "--type", "ClaimRevised", "--json"], env=env)
    assert [e["type"] for e in json.loads(as_json.stdout)] == ["ClaimDrafted", "ClaimRevised", "ClaimRevised"]
    missing = await asyncio.to_thread(runner.invoke, cli, ["history", random_claim_id()], env=env)
    assert missing.exit_code == 1
