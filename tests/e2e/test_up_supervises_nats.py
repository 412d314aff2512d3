"""``claimlog up`` watches its own nats-server: one killed is reaped, said in the log, and started again on
its port and store, and the registry takes writes again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import httpx

from tests.e2e.test_up import alive, free_port, wait_for_page

T = TypeVar("T")


def start_up(*args: str, cwd: Path, output: Path) -> subprocess.Popen[str]:
    """``claimlog up ARGS`` in ``cwd`` with no CLAIMLOG_ settings, its terminal output going to ``output``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAIMLOG_")}
    with output.open("w") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "services.cli", "up", *args], cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, text=True
        )


def said(output: Path) -> str:
    """What ``claimlog up`` printed so far, with Rich's line wrapping undone."""
    return " ".join(output.read_text().split())


def wait_until(found: Callable[[], T | None], what: str, process: subprocess.Popen[str], timeout: float = 60.0) -> T:
    """The first truthy answer of ``found``, asked until ``timeout``; fails if ``claimlog up`` exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, f"claimlog up exited while waiting for {what}"
        answer = found()
        if answer:
            return answer
        time.sleep(0.2)
    raise AssertionError(f"no {what} within {timeout}s")


def recorded(data_dir: Path) -> dict:
    """The data directory's record of its running NATS (``nats.json``), or {} while there is none."""
    try:
        return json.loads((data_dir / "nats.json").read_text())
    except (OSError, ValueError):
        return {}


def recorded_anew(data_dir: Path, ended: int, *, node: int | None = None) -> dict | None:
    """``nats.json`` once it names another process than ``ended`` (for the cluster's ``node``, counted from 0)."""
    record = recorded(data_dir)
    pid = record.get("pid") if node is None else (record.get("pids") or [None] * (node + 1))[node]
    return record if pid not in (None, ended) else None


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAIMLOG_")}
    return subprocess.run([sys.executable, "-m", "services.cli", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def written_through_the_api(base: str, cwd: Path, process: subprocess.Popen[str]) -> int:
    """A new actor's token (the token store takes writes) and a command carried out through the read API's
    writer: the sequence to read after."""

    def added() -> str | None:
        result = run("actors", "add", "ada", "--kind", "person", cwd=cwd)
        return result.stdout.strip() if result.returncode == 0 else None

    token = wait_until(added, "new token", process)

    def filed() -> int | None:
        response = httpx.post(
            f"{base}/commands/file_disagreement", headers={"Authorization": f"Bearer {token}"}, timeout=10,
            json={"claim_id": "CLM-0338", "disagreement_id": "after-restart", "argument": "Written after NATS came back."},
        )
        return response.json()["last_seq"] if response.status_code in (200, 201) else None

    return wait_until(filed, "command carried out", process)


def stop(process: subprocess.Popen[str], output: Path) -> str:
    process.send_signal(signal.SIGINT)
    process.wait(timeout=60)
    assert process.returncode == 0, said(output)
    return said(output)


def test_up_restarts_its_killed_embedded_nats_server_on_the_same_port_and_takes_writes_again(tmp_path: Path):
    data_dir, port, output = tmp_path / ".claimlog", free_port(), tmp_path / "up.out"
    base = f"http://127.0.0.1:{port}"
    process = start_up("--sample", "--port", str(port), cwd=tmp_path, output=output)
    try:
        wait_for_page(f"{base}/claims/CLM-0338", process)
        before = recorded(data_dir)
        os.kill(before["pid"], signal.SIGKILL)

        wait_until(lambda: "nats-server exited (killed by SIGKILL); restarting" in said(output), "log line of the restart", process)
        after = wait_until(lambda: recorded_anew(data_dir, before["pid"]), "record of the restarted server", process)
        assert after["url"] == before["url"]  # the services' URLs name its port
        assert not alive(before["pid"])  # reaped, not left a zombie
        seq = written_through_the_api(base, tmp_path, process)
        page = wait_for_page(f"{base}/claims/CLM-0338?after={seq}", process)
        assert "after-restart" in json.dumps(page)
    finally:
        said_in_all = stop(process, output)
    assert "claimlog stopped" in said_in_all
    assert not alive(after["pid"])
