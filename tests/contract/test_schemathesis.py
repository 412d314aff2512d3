"""A Schemathesis run, as CI runs it, against the API served on a loopback port (a real nats-server, a
running projector, SQLite), with a bearer token: its coverage phase (every documented boundary, valid and
not) and its stateful phase (writes followed by the reads they link to), every check it has, ST202 as
``schemathesis_hooks.positive_data_decided`` (the API's documented decisions on the log's state let
through). None fails. The run stops at its time budget; the coverage phase takes about two minutes."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.integration.command_api import Api, draft, running_api
from tests.integration.test_live import served

SEEDED = ("CLM-0000", "CLM-0001")  # claims the generated commands can act on
ROOT = Path(__file__).resolve().parents[2]
BUDGET = 240  # seconds: the run's own limit (--max-time), well inside CI's


@pytest.fixture
async def api(claim_log, engine) -> AsyncIterator[Api]:
    async for running in running_api(claim_log, engine, read_wait=0.2):
        yield running


def command(url: str, token: str, reports: Path) -> list[str]:
    return [
        sys.executable, "-m", "schemathesis.cli", "run", f"{url}/openapi.json",
        "--phases", "coverage,stateful", "--checks", "all", "--exclude-checks", "positive_data_acceptance", "--header", f"Authorization: Bearer {token}",
        "--max-time", str(BUDGET), "--max-examples", "20", "--seed", "47", "--workers", "1",
        "--request-timeout", "30", "--report", "junit", "--report-dir", str(reports), "--warnings", "off",
    ]


@pytest.mark.slow
@pytest.mark.timeout(BUDGET + 120)
@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_a_schemathesis_run_finds_no_failing_check(api: Api, tmp_path: Path):
    for claim_id in SEEDED:
        assert (await api.send("draft_claim", "drafter", **draft(claim_id))).status_code == 201
    started = time.monotonic()
    async with served(api) as url:
        run = await asyncio.create_subprocess_exec(
            *command(url, api.tokens["ada"], tmp_path), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            cwd=tmp_path, env={**os.environ, "SCHEMATHESIS_HOOKS": "tests.contract.schemathesis_hooks", "PYTHONPATH": str(ROOT)},
        )
        output, _ = await run.communicate()
    text = output.decode(errors="replace")
    print(f"schemathesis: exit {run.returncode}, {time.monotonic() - started:.1f}s\n{text[-1500:]}")
    assert run.returncode == 0, text[-20000:]
