"""One crafted event in the log halts nothing: the projector records it unreadable and goes on, and every
reader of that claim (history, as-of page and scorecard, the command service, verify, show, export)
reports it instead of failing."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import Engine, select

from events import encode
from projections.tables import unreadable_events
from tests.builders import filed
from tests.conftest import random_claim_id
from tests.integration.audit_log import claimlog, publish_raw
from tests.integration.command_api import Api, draft

PAST_THE_CALENDAR = "9999-12-31T23:59:59-14:00"


async def publish_crafted(nats_url: str, claim_id: str) -> int:
    """A DisagreementFiled valid in every field but a time that lies past 9999-12-31 once in UTC."""
    crafted = json.loads(encode(filed(claim_id, "crafted")))
    crafted["occurred_at"] = PAST_THE_CALENDAR
    return await publish_raw(nats_url, f"claims.{claim_id}.DisagreementFiled", json.dumps(crafted).encode())


async def test_a_crafted_time_is_recorded_unreadable_and_every_reader_of_its_claim_goes_on(
    api: Api, engine: Engine, nats_url: str, database_url: str, tmp_path: Path
):
    claim_id, other = random_claim_id(), random_claim_id()
    drafted = await api.send("draft_claim", "drafter", **draft(claim_id))
    assert drafted.status_code == 201, drafted.text
    crafted_seq = await publish_crafted(nats_url, claim_id)

    # The projector passes it: the other claim's write becomes visible, and the crafted one is on record.
    written = await api.send("draft_claim", "drafter", **draft(other))
    assert written.status_code == 201, written.text
    assert (await api.page(other, written.json()["last_seq"]))["statement"]
    with engine.connect() as conn:
        reasons = conn.execute(select(unreadable_events.c.reason).where(unreadable_events.c.seq == crafted_seq)).scalars().all()
    assert len(reasons) == 1 and "occurred_at" in reasons[0] and "outside the range" in reasons[0]

    # The command service reads the claim's history past it and still decides.
    answered = await api.send("file_disagreement", "ada", claim_id=claim_id, disagreement_id="d1", argument="Too few backbones.")
    assert answered.status_code == 201, answered.text
    after = answered.json()["last_seq"]
    assert [d["disagreement_id"] for d in (await api.page(claim_id, after))["disagreements"]] == ["d1"]

    history = await api.http.get(f"/claims/{claim_id}/history")
    assert history.status_code == 200, history.text
    entries = {entry["seq"]: entry for entry in history.json()["events"]}
    assert "outside the range" in entries[crafted_seq]["unreadable"]
    for path in (f"/claims/{claim_id}", "/scorecard"):
        as_of = await api.http.get(path, params={"as_of_seq": crafted_seq})
        assert as_of.status_code == 200, f"{path}: {as_of.text}"

    # The terminal tools report it instead of crashing.
    env = {"nats_url": nats_url, "database_url": database_url, "cwd": tmp_path}
    verified = claimlog("verify", "--json", **env)
    assert verified.returncode == 1 and "Traceback" not in verified.stderr, verified.stderr
    findings = json.loads(verified.stdout)["findings"]
    assert [f["seq"] for f in findings if f["kind"] == "unreadable"] == [crafted_seq], verified.stdout
    for command in (["show", claim_id], ["history", claim_id], ["export", "--out", str(tmp_path / "log.jsonl")]):
        done = claimlog(*command, **env)
        assert done.returncode == 0 and "Traceback" not in done.stderr, f"{command}: {done.stderr}"

    # Bulk ingestion decides against the same history and reports each line.
    lines = tmp_path / "commands.jsonl"
    lines.write_text(json.dumps({"command": "file_disagreement", "claim_id": claim_id, "disagreement_id": "d2", "argument": "One seed."}) + "\n")
    ingested = claimlog("ingest", str(lines), **env, token=api.tokens["ada"])
    assert ingested.returncode == 0 and "Traceback" not in ingested.stderr, ingested.stderr
    assert "d2" in [d["disagreement_id"] for d in (await api.page(claim_id, await api.log.head()))["disagreements"]]
