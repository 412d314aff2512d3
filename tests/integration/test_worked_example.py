"""docs/worked-example.md, run: its JSON Lines ingested with a model's token give back the registry page it
started from (naming who brought its source), and the answers the page describes."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from tests.conftest import random_claim_id
from tests.integration.command_api import Api
from tests.integration.test_bulk import claimlog

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "worked-example.md"
PAGE = ROOT / "services" / "ingest" / "samples" / "CLM-0631.txt"
SLUG = "rl-training-central-agent-multi-agent-harness-1-5b-3b-qwen2-5-backbones"


def documented_lines() -> str:
    [block] = re.findall(r"```jsonl\n(.*?)```", DOC.read_text(), flags=re.S)
    return block


async def test_the_worked_example_gives_back_its_registry_page(api: Api, nats_url: str, tmp_path: Path):
    claim = random_claim_id()  # the page's own id and slug, made unique to this test's registry
    slug = f"{SLUG}-{claim.lower().removeprefix('clm-')}"
    lines = tmp_path / "CLM-0631.jsonl"
    lines.write_text(documented_lines().replace("CLM-0631", claim).replace(SLUG, slug))
    token = api.tokens["drafter"]

    first = await asyncio.to_thread(claimlog, "ingest", str(lines), nats_url=nats_url, token=token, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "7 lines: 7 accepted, 0 already present, 0 rejected; as model drafter" in first.stderr
    again = await asyncio.to_thread(claimlog, "ingest", str(lines), nats_url=nats_url, token=token, cwd=tmp_path)
    assert "7 lines: 0 accepted, 7 already present, 0 rejected" in again.stderr, again.stderr

    head = await api.log.head()
    text = await api.http.get(f"/claims/{claim}/text", params={"after": head})
    started = PAGE.read_text().rstrip("\n").replace("CLM-0631", claim).replace(SLUG, slug)
    # One line more than the registry's page: here who brought the source is known, and the text says so.
    source = next(line for line in started.split("\n") if line.startswith("- Validated by: "))
    assert text.text == started.replace(source, source + "\n  Brought by drafter (model: drafter-2).")

    page = await api.page(claim, head)
    assert page["status"]["unreviewed_model_draft"] is True
    assert page["status"]["counts_toward_scorecard"] is False
    assert page["counts"]["sources_by_relation"]["validates"] == 1 == page["counts"]["sources_active"]
    assert page["sources"][0]["brought"]["by"]["id"] == "drafter"
    assert page["notes"]["drafted_confidence"] == "low"
    html = (await api.http.get(f"/pages/claims/{claim}", params={"after": head})).text
    assert '<div class="caveats"><strong>Measured:</strong> one ablation table' in html
    card = (await api.http.get("/scorecard", params={"after": head})).json()
    [mine] = [c for c in card["capabilities"] if c["capability"] == "Getting more from several models than from one"]
    assert mine["unreviewed_model_drafts_left_out"] >= 1
