"""``claimlog up`` on a data directory past 1,000 events, most partitions holding none: stopped and started
again, it is ready at once, with no traceback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.e2e.test_up import free_port

CLAIMS = 11  # over 16 partitions: at least five hold no event
SOURCES = 99  # each claim's draft and its sources: 1,100 events in all


def commands_file(path: Path) -> Path:
    """JSON Lines of 1,100 commands: a few claims, each with many sources."""
    lines = []
    for n in range(CLAIMS):
        claim = f"CLM-{9000 + n}"
        lines.append({
            "command": "draft_claim", "claim_id": claim, "slug": f"restart-{n}", "statement": "S.", "capability": "C",
            "observed_on": "O.",
        })
        lines += [
            {"command": "attach_source", "claim_id": claim, "source_id": f"s{k}", "relation": "supports", "measured": "M."}
            for k in range(SOURCES)
        ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def start(tmp_path: Path, port: int, run: int) -> tuple[subprocess.Popen, Path]:
    output = tmp_path / f"up-{run}.txt"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAIMLOG_")} | {"COLUMNS": "200"}
    with output.open("w") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "services.cli", "up", "--port", str(port)],
            cwd=tmp_path, env=env, stdout=sink, stderr=subprocess.STDOUT, text=True,
        )
    return process, output


def wait_until_up(process: subprocess.Popen, output: Path, timeout: float) -> str:
    """What ``claimlog up`` printed up to the end of its announcement that it is up (fails if it exits or takes
    longer): the panel's last line, since its title alone can be read before the rest is written."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        said = output.read_text()
        assert process.poll() is None, f"claimlog up exited with {process.returncode}:\n{said}"
        if "claimlog is up" in said and "Ctrl-C stops everything" in said:
            return said
        time.sleep(0.2)
    raise AssertionError(f"claimlog up did not come up within {timeout}s:\n{output.read_text()}")


def stop(process: subprocess.Popen, output: Path) -> str:
    process.send_signal(signal.SIGINT)
    process.wait(timeout=60)
    said = output.read_text()
    assert process.returncode == 0, said
    return said


def cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAIMLOG_")} | {"COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "services.cli", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)


def test_a_registry_past_a_thousand_events_starts_again_and_is_ready(tmp_path: Path):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    process, output = start(tmp_path, port, 1)
    try:
        wait_until_up(process, output, timeout=90)
        added = cli(tmp_path, "actors", "add", "tester", "--kind", "person")
        assert added.returncode == 0, added.stderr
        token = added.stdout.strip().splitlines()[-1]
        ingested = cli(tmp_path, "ingest", str(commands_file(tmp_path / "commands.jsonl")), "--token", token)
        assert ingested.returncode == 0, ingested.stdout + ingested.stderr
        last = httpx.get(f"{base}/claims/CLM-{9000 + CLAIMS - 1}", params={"after": CLAIMS * (SOURCES + 1)}, timeout=30)
        assert last.status_code == 200 and len(last.json()["sources"]) == SOURCES, last.text
    finally:
        first = stop(process, output)
    assert "Traceback" not in first, first

    process, output = start(tmp_path, port, 2)
    try:
        said = wait_until_up(process, output, timeout=90)
        ready = httpx.get(f"{base}/health/ready", timeout=10)
        assert ready.status_code == 200, ready.text
        health = httpx.get(f"{base}/health", timeout=10).json()
        # every claim's events, and the key registry's two changes of the first start (the API's key added,
        # signatures required): the log records them as its own messages (docs/events.md#the-key-registrys-changes)
        assert health["head"] == CLAIMS * (SOURCES + 1) + 2
        assert all(seq == health["head"] for seq in health["projections"].values()), health
    finally:
        said = stop(process, output)
    assert "Traceback" not in said and "did not answer" not in said, said
