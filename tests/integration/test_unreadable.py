"""Malformed events written past services.log are recorded with why, and do not stop the projector."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import nats
from sqlalchemy import Engine, select

from events import encode
from events.subjects import DEFAULT_LAYOUT
from projections.registry import build_projections
from projections.tables import unreadable_events
from services.log import ClaimLog
from services.projector import Projector
from services.read_api.queries import claim_page
from tests.builders import drafted
from tests.conftest import random_claim_id


def malformed(claim_id: str) -> list[tuple[str, bytes, str]]:
    """Event type in the subject, bytes, and what the reason must say."""
    draft = json.loads(encode(drafted(claim_id)))
    without_statement = {key: value for key, value in draft.items() if key != "statement"}
    teleported = {**without_statement, "type": "ClaimTeleported"}
    return [
        ("ClaimDrafted", b"\xff{not json", "not JSON"),
        ("ClaimTeleported", json.dumps(teleported).encode(), "unknown event type 'ClaimTeleported'"),
        ("ClaimDrafted", json.dumps(without_statement).encode(), "statement: Field required"),
        ("ClaimDrafted", json.dumps({**draft, "schema_version": 99}).encode(), "newer than this code reads"),
    ]


async def test_each_unreadable_event_is_recorded_with_why_and_a_valid_claim_still_projects(
    nats_url: str, claim_log: ClaimLog, engine: Engine, claim_id: str
):
    raw = await nats.connect(nats_url)
    try:
        js = raw.jetstream()
        written = []
        for event_type, data, reason in malformed(claim_id):
            subject = DEFAULT_LAYOUT.publish_subject(claim_id, event_type)
            stored = DEFAULT_LAYOUT.stored_subject(claim_id, event_type)
            written.append((stored, (await js.publish(subject, data)).seq, reason))
    finally:
        await raw.close()
    valid_claim = random_claim_id()
    await claim_log.append(valid_claim, [drafted(valid_claim)], expected_seq=0, prev_hash=None)

    projector = Projector(claim_log, engine, build_projections(), name="projector", batch=1000)
    await projector.run_until(await claim_log.head())

    with engine.connect() as conn:
        rows = conn.execute(select(unreadable_events).order_by(unreadable_events.c.seq)).all()
        valid_page, bad_page = claim_page(conn, valid_claim), claim_page(conn, claim_id)
    assert [(row.subject, row.seq) for row in rows] == [(subject, seq) for subject, seq, _ in written]
    for row, (_, _, reason) in zip(rows, written, strict=True):
        assert reason in row.reason, f"sequence {row.seq}: {row.reason!r} does not say {reason!r}"
    assert "invalid ClaimDrafted" in rows[2].reason and "ClaimDrafted schema_version 99" in rows[3].reason
    assert bad_page is None
    assert valid_page.statement == f"Statement of {valid_claim}." and valid_page.as_of_seq == await claim_log.head()

    # Visible through the API and the CLI, not only in the table.
    from fastapi.testclient import TestClient

    from services.http import create_app

    listed = TestClient(create_app(engine)).get("/unreadable-events").json()
    assert [(e["seq"], e["reason"]) for e in listed] == [(row.seq, row.reason) for row in rows]
    env = {**os.environ, "CLAIMLOG_DATABASE_URL": engine.url.render_as_string(hide_password=False), "COLUMNS": "250"}
    shown = subprocess.run(
        [sys.executable, "-m", "services.cli", "unreadable"], env=env, capture_output=True, text=True, timeout=60
    )
    assert shown.returncode == 1, shown.stderr
    assert "4 unreadable event(s)" in shown.stdout and "ClaimTeleported" in shown.stdout
