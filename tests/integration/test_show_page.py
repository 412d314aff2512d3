"""``claimlog show`` shows what the claim's HTML page shows, in the same words as the page's HTML and text: the slug, a withdrawn review with its state and why,
disagreements with their source, evidence, answers and resolution, related claims with capability and label."""

from __future__ import annotations

import asyncio
import html
import re

from typer.testing import CliRunner

from services.cli import app as cli
from tests.conftest import random_claim_id
from tests.integration.command_api import Api, draft
from tests.integration.test_as_of import send_all

RELATED_STATEMENT = "Reflection after acting helps small models on code."


async def a_page_with_every_part(api: Api) -> tuple[str, int]:
    claim, other = random_claim_id(), random_claim_id()
    await send_all(api, other, [("draft_claim", "ada", {**draft(other), "statement": RELATED_STATEMENT,
                                                        "slug": f"other-{other.lower()}", "capability": "Coding"})])
    last = await send_all(api, claim, [
        ("draft_claim", "drafter", {k: v for k, v in draft(claim).items() if k != "claim_id"}),
        ("attach_source", "bot", {"source_id": "s1", "relation": "supports", "measured": "Accuracy on GSM8K."}),
        ("attach_source", "bot", {"source_id": "s2", "relation": "contradicts", "measured": "No effect on MATH."}),
        ("withdraw_source", "bot", {"source_id": "s2", "reason": "Wrong paper."}),
        ("file_disagreement", "grace", {"disagreement_id": "d1", "argument": "Two backbones are too few.",
                                        "source_id": "s1", "evidence": "Table 3 has two rows."}),
        ("answer_disagreement", "ada", {"disagreement_id": "d1", "answer": "A third backbone is in the appendix."}),
        ("resolve_disagreement", "ada", {"disagreement_id": "d1", "outcome": "rejected", "note": "The appendix holds."}),
        ("file_disagreement", "grace", {"disagreement_id": "d2", "argument": "The benchmark leaks."}),
        ("answer_disagreement", "ada", {"disagreement_id": "d2", "answer": "The split predates the model."}),
        ("record_review", "grace", {"review_id": "r1", "verdict": "sound", "confidence": "high", "revision": 1}),
        ("withdraw_review", "grace", {"review_id": "r1", "reason": "Reviewed the wrong revision."}),
        ("record_review", "critic", {"review_id": "r2", "verdict": "inconclusive", "confidence": "low", "revision": 1,
                                     "summary": "Too few runs."}),
        ("relate_claims", "ada", {"related_claim_id": other, "statement": RELATED_STATEMENT, "capability": "Coding",
                                  "review_label": "reviewed by AI", "rank": 1}),
        ("relate_claims", "ada", {"statement": "Tool use helps large models.", "capability": "Using tools",
                                  "review_label": "unreviewed", "rank": 2}),
    ])
    return claim, last


async def test_show_prints_every_part_the_html_page_shows(api: Api, nats_url: str, database_url: str):
    claim, last = await a_page_with_every_part(api)
    page = await api.page(claim, after=last)
    env = {"CLAIMLOG_NATS_URL": nats_url, "CLAIMLOG_DATABASE_URL": database_url, "COLUMNS": "400"}
    shown = await asyncio.to_thread(CliRunner().invoke, cli, ["show", claim], env=env)
    assert shown.exit_code == 0, shown.output
    said = " ".join(shown.stdout.replace("│", " ").split())

    assert f"{claim} · {page['slug']} · revision 1" in said
    assert "Withdrawn by source-bot (service): Wrong paper." in said
    # Disagreements: what about, with what evidence, every answer and who gave it, and how it ended.
    for words in ("about source s1", "evidence: Table 3 has two rows.",
                  "Answered by ada (person): A third backbone is in the appendix.",
                  "Rejected by ada (person): The appendix holds.",
                  "Answered by ada (person): The split predates the model.", "open, answered"):
        assert words in said, words
    # Reviews: the withdrawn one says so, by whom and why; the active one is active.
    assert "Withdrawn by grace (person): Reviewed the wrong revision." in said
    assert "AI: critic (model: critic-1)" in said and "inconclusive: Too few runs." in said
    r2 = next(line for line in shown.stdout.splitlines() if " r2 " in line)
    assert "active" in r2
    # Related claims: capability and label, as the page gives them.
    assert f"{RELATED_STATEMENT}" in said and "Coding" in said
    assert "reviewed by AI · its page now: unreviewed (the label disagrees with its page)" in said
    assert "Tool use helps large models." in said and "Using tools" in said and "unreviewed" in said


def words_of(markup: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", markup)).split())


async def test_a_withdrawn_review_and_an_answered_disagreement_read_the_same_in_html_text_and_the_terminal(
    api: Api, nats_url: str, database_url: str
):
    claim, last = await a_page_with_every_part(api)
    page = await api.page(claim, after=last)
    assert [r["state"] for r in page["reviews"]] == ["withdrawn", "active"]
    assert [d["state"] for d in page["disagreements"]] == ["resolved", "open"]
    text = " ".join((await api.http.get(f"/claims/{claim}/text")).text.split())
    page_html = words_of((await api.http.get(f"/pages/claims/{claim}")).text)
    env = {"CLAIMLOG_NATS_URL": nats_url, "CLAIMLOG_DATABASE_URL": database_url, "COLUMNS": "400"}
    shown = await asyncio.to_thread(CliRunner().invoke, cli, ["show", claim], env=env)
    terminal = " ".join(shown.stdout.replace("│", " ").split())

    for who, said in (("grace (person)", "Reviewed the wrong revision."), ("ada (person)", "The split predates the model."),
                      ("ada (person)", "A third backbone is in the appendix.")):
        verb = "Withdrawn" if said.startswith("Reviewed") else "Answered"
        assert f"{verb} by {who}: {said}" in text, said
        assert f"{verb} by {who}: {said}" in terminal, said
        assert re.search(rf"{verb} by {re.escape(who)} on [-0-9]+ [0-9:]+ UTC: {re.escape(said)}", page_html), said
    assert "Rejected by ada (person): The appendix holds." in text and "Rejected by ada (person): The appendix holds." in terminal
    assert re.search(r"resolved Rejected by ada \(person\) on [-0-9]+ [0-9:]+ UTC: The appendix holds\.", page_html)
    assert "open, answered" in page_html and "open, answered" in terminal
