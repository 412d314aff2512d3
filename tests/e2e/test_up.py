"""``claimlog up --sample`` on the embedded default: from nothing to a served claim page, then a clean stop."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def nats_user_of(pid: int) -> tuple[str, str | None]:
    """A running claimlog service: its subcommand, and the NATS user its environment connects as."""
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    environ = dict(
        entry.split("=", 1) for entry in Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0") if "=" in entry
    )
    url = environ.get("CLAIMLOG_NATS_URL")
    return argv[3].decode() if len(argv) > 3 else argv[0].decode(), urlsplit(url).username if url else None


def wait_for_page(url: str, process: subprocess.Popen, timeout: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, "claimlog up exited early"
        try:
            response = httpx.get(url, timeout=1)
            if response.status_code == 200:
                return response.json()
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{url} did not answer within {timeout}s")


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM])
def test_up_serves_the_sample_pages_and_stops_everything_cleanly(tmp_path: Path, stop_signal: signal.Signals):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAIMLOG_")}
    process = subprocess.Popen(
        [sys.executable, "-m", "services.cli", "up", "--sample", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        page = wait_for_page(f"http://127.0.0.1:{port}/claims/CLM-0338", process)
        assert page["capability"] == "Carrying a chain of inference through to its conclusion"
        assert page["sources"][0]["brought"]["by"]["kind"] == "service"  # imported: the page names no bringer
        assert page["sources"][0]["imported_from"] == "CLM-0338.txt"
        assert len(page["related"]) == 5
        nats_pid = json.loads((tmp_path / ".claimlog" / "nats.json").read_text())["pid"]
        children = subprocess.run(["pgrep", "-P", str(process.pid)], capture_output=True, text=True).stdout.split()
        assert len(children) == 3 + 1  # projector, the transparency log's integrator, api and the embedded nats-server
        services = dict(nats_user_of(int(pid)) for pid in children if int(pid) != nats_pid)
        assert services == {"projector": "projector", "tlog": "projector", "api": "writer"}
    finally:
        process.send_signal(stop_signal)
        output, _ = process.communicate(timeout=30)
    assert process.returncode == 0, output
    assert "claimlog is up" in output and "claimlog stopped" in output
    passwords = json.loads((tmp_path / ".claimlog" / "nats-users.json").read_text())
    assert "admin:***@127.0.0.1" in output
    assert not any(password in output for password in passwords.values())
    assert not alive(nats_pid)
    assert all(not alive(int(pid)) for pid in children)
    assert (tmp_path / ".claimlog" / "claimlog.sqlite3").exists()


def test_up_refuses_a_port_that_is_taken_and_says_which(tmp_path: Path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if not k.startswith("CLAIMLOG_")}
        result = subprocess.run(
            [sys.executable, "-m", "services.cli", "up", "--port", str(port)],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
        )
    assert result.returncode == 2
    assert f"127.0.0.1:{port} is already in use" in result.stdout
    assert not (tmp_path / ".claimlog" / "nats.json").exists()
