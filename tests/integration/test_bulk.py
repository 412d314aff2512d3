"""``claimlog ingest`` of JSON Lines commands against a real nats-server: report, rejections, re-runs."""

from __future__ import annotations

import gc
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from events import Actor
from services.admission import Gate  # no keys: these logs are unsigned
from services.commands.claim_state import claim_state
from services.identity.actors import ActorStore
from services.ingest.bulk import BulkIngest
from services.ingest.bulk_lines import read_commands
from services.log import ClaimLog
from tests.builders.workload import write_commands

BOT = Actor(id="ingest-bot", kind="model", model="pipeline-2")


def claimlog(*args: str, nats_url: str, token: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CLAIMLOG_NATS_URL": nats_url, "CLAIMLOG_TOKEN": token, "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "services.cli", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=600
    )


@pytest.fixture
async def token(claim_log: ClaimLog) -> str:
    store = await ActorStore.open(claim_log.nc, create=True)
    return (await store.issue(BOT))[0]


def write_lines(path: Path, lines: list[object]) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


DRAFT = {"command": "draft_claim", "claim_id": "CLM-0100", "slug": "a-claim", "statement": "S.", "capability": "C", "observed_on": "O."}


async def test_each_bad_line_is_reported_with_its_number_and_the_rest_applies(claim_log: ClaimLog, tmp_path: Path):
    path = write_lines(tmp_path / "commands.jsonl", [
        DRAFT,
        "{not json",
        {"command": "attach_source", "claim_id": "CLM-0100", "source_id": "s1", "relation": "supports", "measured": "M."},
        {"command": "attach_source", "claim_id": "CLM-0100", "source_id": "s1", "relation": "supports", "measured": "Again."},
        {"command": "teleport_claim", "claim_id": "CLM-0100"},
        {"command": "answer_disagreement", "claim_id": "CLM-0100", "disagreement_id": "d9", "answer": "A."},
        {"command": "attach_source", "claim_id": "CLM-0200", "source_id": "s1", "relation": "supports", "measured": "M."},
        {"command": "relate_claims", "claim_id": "CLM-0100", "related_claim_id": "CLM-0300"},
        {**DRAFT, "claim_id": "CLM-0300", "slug": "later"},
    ])
    lines, errors = read_commands(path, BOT)
    report = await BulkIngest(claim_log, BOT, window=4).run(lines)
    rejected = sorted([(e.number, e.reason) for e in errors + report.rejected])
    assert rejected == [
        (2, "not_json"), (4, "source_exists"), (5, "invalid_command"), (6, "disagreement_not_found"),
        (7, "claim_not_found"), (8, "claim_not_found"),
    ]
    assert (report.accepted, report.present) == (3, 0)
    state = claim_state("CLM-0100", await claim_log.read_claim("CLM-0100"), Gate())
    assert set(state.sources) == {"s1"} and state.drafted


async def test_a_reference_to_a_claim_drafted_earlier_in_the_file_holds(claim_log: ClaimLog, tmp_path: Path):
    path = write_lines(tmp_path / "commands.jsonl", [
        {**DRAFT, "claim_id": "CLM-0300", "slug": "first"},
        DRAFT,
        {"command": "relate_claims", "claim_id": "CLM-0100", "related_claim_id": "CLM-0300"},
        {"command": "supersede_claim", "claim_id": "CLM-0300", "superseded_by": "CLM-0100"},
    ])
    lines, _ = read_commands(path, BOT)
    report = await BulkIngest(claim_log, BOT, window=8).run(lines)
    assert (report.accepted, report.rejected) == (4, [])


@pytest.mark.slow
async def test_a_file_of_100000_commands_ingests_with_progress_and_a_second_run_adds_nothing(
    nats_url: str, claim_log: ClaimLog, token: str, tmp_path: Path
):
    path = tmp_path / "commands.jsonl"
    lines = write_commands(path, claims=10_000, per_claim=10)
    with path.open("a") as out:
        out.write('{"command": "attach_source", "claim_id": "CLM-0000001", "source_id": "s1"}\n')  # no relation
    first = claimlog("ingest", str(path), "--report", str(tmp_path / "report.json"), nats_url=nats_url, token=token, cwd=tmp_path)
    assert first.returncode == 1, first.stderr
    assert f"{lines + 1} lines: {lines} accepted, 0 already present, 1 rejected; as model ingest-bot" in first.stderr
    assert f"line {lines + 1} invalid_command" in first.stderr and "relation: Field required" in first.stderr
    assert "commands/s" in first.stderr  # the progress bar's rate
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["rejected"][0]["line"] == lines + 1 and report["accepted"] == lines
    head = await claim_log.head()
    assert head == lines
    second = claimlog("ingest", str(path), nats_url=nats_url, token=token, cwd=tmp_path)
    assert f"{lines + 1} lines: 0 accepted, {lines} already present, 1 rejected" in second.stderr, second.stderr
    assert await claim_log.head() == head


async def test_bulk_ingest_needs_a_live_token(nats_url: str, claim_log: ClaimLog, token: str, tmp_path: Path):
    path = write_lines(tmp_path / "commands.jsonl", [DRAFT])
    forged = claimlog("ingest", str(path), nats_url=nats_url, token="clm_forged", cwd=tmp_path)
    assert forged.returncode == 2 and "unknown or revoked" in forged.stderr
    assert await claim_log.head() == 0


async def test_garbage_collection_is_the_commands_policy_not_the_ingests(nats_url: str, claim_log: ClaimLog, token: str, tmp_path: Path):
    # Freezing what lives is process-wide: ``BulkIngest`` leaves it to its ``after_batch`` hook, which
    # ``claimlog ingest`` (``services/ingest/cli.py``) sets to ``gc.freeze`` after each acknowledged batch.
    from rich.console import Console

    from services.ingest.bulk_lines import iter_commands
    from services.ingest.cli import ingest_commands
    from services.runtime.settings import Settings

    path = tmp_path / "commands.jsonl"
    write_commands(path, claims=300, per_claim=2)
    gc.unfreeze()
    try:
        calls = []
        report = await BulkIngest(claim_log, BOT, batch=100, after_batch=lambda: calls.append(gc.get_freeze_count())).run(
            iter_commands(path)
        )
        assert report.accepted == 600 and len(calls) >= 6  # once for each acknowledged batch
        assert gc.get_freeze_count() == 0 and set(calls) == {0}
        again = write_lines(tmp_path / "more.jsonl", [DRAFT])
        settings = Settings(nats_url=nats_url, data_dir=tmp_path / "data")
        assert await ingest_commands(settings, again, token, Console(file=io.StringIO())) == 0
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


async def test_a_draft_too_large_for_a_transparency_log_entry_refuses_its_line_only(claim_log: ClaimLog, tmp_path: Path):
    huge = {**DRAFT, "claim_id": "CLM-0400", "slug": "huge", "statement": "é" * 19_000, "observed_on": "ö" * 19_000}
    path = write_lines(tmp_path / "commands.jsonl", [DRAFT, huge, {**DRAFT, "claim_id": "CLM-0500", "slug": "after"}])
    lines, errors = read_commands(path, BOT)
    report = await BulkIngest(claim_log, BOT, window=4).run(lines)
    assert [(e.number, e.reason) for e in errors + report.rejected] == [(2, "event_too_large")]
    assert report.accepted == 2 and not await claim_log.read_claim("CLM-0400")
