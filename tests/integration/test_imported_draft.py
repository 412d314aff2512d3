"""A draft imported from a registry page is the importer's, with the page and what the page says: that an
unnamed model drafted it. No page credits an invented actor, and the draft stays out of the scorecard until
it is reviewed, whether it was imported now or stored by an older import as the registry-drafter's."""

from __future__ import annotations

import html
import re

from rich.console import Console

from services.cli.page_view import render_page
from services.ingest.page_format import UNREVIEWED_NOTE
from services.ingest.pages import import_page, read_page, sample_pages
from tests.builders.raw import publish_raw
from tests.conftest import random_claim_id
from tests.integration.command_api import Api

SAMPLE = "CLM-0338"
SAID = "drafted by an unnamed model; imported by claimlog-ingest (service) from CLM-0338.txt"
# What a version 1 page import stored, before drafts said who the page says drafted them.
REGISTRY_DRAFTER = {"id": "registry-drafter", "kind": "model", "model": "unnamed registry drafting model"}


def _read(markup: str) -> str:
    """What a reader of an HTML page reads: its text, tags left out."""
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


def _terminal(page: dict) -> str:
    console = Console(record=True, width=400, color_system=None)
    console.print(render_page(page))
    return console.export_text()


async def test_an_imported_draft_says_an_unnamed_model_drafted_it_and_who_imported_it_from_which_page(api: Api):
    path = next(p for p in sample_pages() if p.stem == SAMPLE)
    imported = await import_page(api.log, read_page(path))
    page = await api.page(SAMPLE, after=imported.last_seq)

    notes = page["notes"]
    assert notes["drafted"]["by"] == {"id": "claimlog-ingest", "kind": "service", "model": None}
    assert (notes["drafted"]["imported_from"], notes["drafted_by"]) == ("CLM-0338.txt", {"kind": "model", "model": None})
    assert notes["drafted_by_model"] is True and page["status"]["unreviewed_model_draft"] is True
    assert page["status"]["counted_standing"] is None and page["status"]["counts_toward_scorecard"] is False

    shown = _read((await api.http.get(f"/pages/claims/{SAMPLE}")).text)
    assert "Drafted by an unnamed model; imported by claimlog-ingest (service) from CLM-0338.txt on " in shown
    text = (await api.http.get(f"/claims/{SAMPLE}/text")).text
    assert text == path.read_text(encoding="utf-8").rstrip("\n") and UNREVIEWED_NOTE in text
    history = (await api.http.get(f"/claims/{SAMPLE}/history")).json()["events"]
    draft = history[0]
    assert (draft["type"], draft["actor"]["id"]) == ("ClaimDrafted", "claimlog-ingest")
    assert {"field": "drafted_by", "before": None, "after": SAID[len("drafted by "):]} in draft["diff"]
    history_page = _read((await api.http.get(f"/pages/claims/{SAMPLE}/history")).text)
    assert SAID[len("drafted by "):] in history_page
    terminal = _terminal(page)
    assert SAID in terminal
    everything = [str(page), shown, text, str(history), history_page, terminal]
    assert not [said for said in everything if "registry-drafter" in said or "registry drafting model" in said]


def _version_1(claim_id: str, capability: str) -> list[dict]:
    """A claim's draft and source as a version 1 page import stored them: both the registry-drafter's."""
    envelope = {"claim_id": claim_id, "occurred_at": "2026-11-01T12:00:00Z", "actor": REGISTRY_DRAFTER}
    return [
        {"event_id": "019a4000-0000-7000-8000-000000000001", "type": "ClaimDrafted", **envelope,
         "slug": f"old-{claim_id.lower()}", "statement": "An old import's statement.", "capability": capability,
         "observed_on": "One benchmark", "drafted_confidence": "low"},
        {"event_id": "019a4000-0000-7000-8000-000000000002", "type": "SourceAttached", **envelope,
         "source_id": "src-1", "relation": "validates", "measured": "Accuracy on one benchmark."},
    ]


def _capability(card: dict, capability: str) -> dict:
    return next(c for c in card["capabilities"] if c["capability"] == capability)


async def test_a_draft_stored_by_an_older_import_keeps_its_standing_and_scorecard_and_names_no_invented_actor(api: Api):
    claim, capability = random_claim_id(), f"Capability of {random_claim_id()}"
    for raw in _version_1(claim, capability):
        last = await publish_raw(api.log, claim, raw)
    page = await api.page(claim, after=last)
    # As before: an unreviewed model draft, its evidence shown, moving no standing, left out of the scorecard.
    status = page["status"]
    assert (status["unreviewed_model_draft"], status["evidence"], status["counted_standing"]) == (True, "validated", None)
    card = _capability((await api.http.get("/scorecard")).json(), capability)
    assert (card["claims_counted"], card["unreviewed_model_drafts_left_out"]) == (0, 1)
    # Read through the upcaster: the importer's draft, which a page said a model drafted.
    notes = page["notes"]
    assert (notes["drafted"]["by"]["id"], notes["drafted"]["imported_from"]) == ("claimlog-ingest", "a registry page")
    assert notes["drafted_by"] == {"kind": "model", "model": None}

    reviewed = await api.send("record_review", "ada", claim_id=claim, review_id="r1", verdict="sound", confidence="high",
                              revision=1)
    assert reviewed.status_code == 201, reviewed.text
    page = await api.page(claim, after=reviewed.json()["last_seq"])
    assert (page["status"]["unreviewed_model_draft"], page["status"]["counted_standing"]) == (False, "validated")
    card = _capability((await api.http.get("/scorecard")).json(), capability)  # committed with the page
    assert (card["claims_counted"], card["by_standing"]["validated"], card["unreviewed_model_drafts_left_out"]) == (1, 1, 0)
