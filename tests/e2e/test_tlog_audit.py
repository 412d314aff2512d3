"""`claimlog up --sample` publishes a transparency log that `claimlog audit` verifies over HTTP, as an outsider would."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.e2e.test_up import free_port, wait_for_page
from tlog.cosignature import Cosigner


def claimlog(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "services.cli", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_the_log_up_publishes_is_verified_by_an_audit_over_http(tmp_path: Path):
    port, env = free_port(), {k: v for k, v in os.environ.items() if not k.startswith("CLAIMLOG_")}
    base = f"http://127.0.0.1:{port}"
    process = subprocess.Popen([sys.executable, "-m", "services.cli", "up", "--sample", "--port", str(port)],
                               cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_page(f"{base}/claims/CLM-0338", process)
        head = httpx.get(f"{base}/health").json()["head"]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # a checkpoint covering the sample follows within a round
            answer = httpx.get(f"{base}/log/checkpoint")
            size = int(answer.text.split("\n")[1]) if answer.status_code == 200 else 0
            if size >= head:
                break
            time.sleep(0.2)
        vkey = claimlog("tlog", "vkey", cwd=tmp_path, env=env).stdout.strip()
        assert httpx.get(f"{base}/log/vkey").text.strip() == vkey
        audited = claimlog("audit", base, "--key", vkey, "--dir", str(tmp_path / "audit"), cwd=tmp_path, env=env)
        assert audited.returncode == 0, audited.stderr
        assert f"size {size} verified (from 0; {size} entries rehashed" in " ".join(audited.stderr.split()), audited.stderr
        again = claimlog("audit", base, "--dir", str(tmp_path / "audit"), cwd=tmp_path, env=env)  # the pinned key
        assert again.returncode == 0, again.stderr
        wrong = claimlog("audit", base, "--key", vkey.replace(vkey.split("+")[0], "other.test/log", 1),
                         "--dir", str(tmp_path / "audit"), cwd=tmp_path, env=env)
        assert wrong.returncode == 1 and "not the one pinned" in wrong.stderr
        compared = claimlog("audit", base, "--compare", "--dir", str(tmp_path / "audit"), cwd=tmp_path, env=env)
        said = " ".join(compared.stderr.split())
        assert compared.returncode == 0, compared.stderr
        assert "the scorecard and 3 of 3 claims' pages; 0 differ" in said, said
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)


def test_up_with_a_witness_serves_checkpoints_it_cosigned_and_an_audit_requiring_it_passes(tmp_path: Path):
    """`claimlog up --witness`: every checkpoint served carries the local witness's cosignature, which `claimlog
    audit --witness` requires; the panel gives the witness's key and says that it assures nobody."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAIMLOG_")} | {"COLUMNS": "300"}
    base, printed = f"http://127.0.0.1:{port}", tmp_path / "up.out"
    with printed.open("w") as out:
        process = subprocess.Popen([sys.executable, "-m", "services.cli", "up", "--sample", "--witness", "--port", str(port)],
                                   cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for_page(f"{base}/claims/CLM-0338", process)
        panel = _panel(printed, process)
        vkey = next(line.split()[-1] for line in panel if line.startswith("witness ") and "http://" in line)
        assert any("it assures nobody" in line for line in panel), panel
        name = vkey.split("+")[0]
        head = httpx.get(f"{base}/health").json()["head"]
        deadline, note = time.monotonic() + 30, ""
        while time.monotonic() < deadline:  # the checkpoint covering the sample, with the witness's cosignature
            note = httpx.get(f"{base}/log/checkpoint").text
            if f"\u2014 {name} " in note and int(note.split("\n")[1]) >= head:
                break
            time.sleep(0.2)
        assert f"\u2014 {name} " in note, note
        audited = claimlog("audit", base, "--witness", vkey, "--dir", str(tmp_path / "audit"), cwd=tmp_path, env=env)
        assert audited.returncode == 0, audited.stderr
        other = Cosigner("localhost/another-witness", bytes(32)).vkey()  # a witness that never saw this log
        refused = claimlog("audit", base, "--witness", other, "--dir", str(tmp_path / "audit2"), cwd=tmp_path, env=env)
        assert refused.returncode == 1 and "no valid cosignature" in refused.stderr, refused.stderr
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)


def _panel(printed: Path, process: subprocess.Popen, timeout: float = 60.0) -> list[str]:
    """The lines of the panel `claimlog up` printed once everything answered, without its borders."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = printed.read_text(errors="replace")
        if "Ctrl-C stops everything" in text:
            return [line.strip(" \u2502") for line in text.splitlines()]
        assert process.poll() is None, text
        time.sleep(0.2)
    raise AssertionError(f"claimlog up printed no panel within {timeout}s: {printed.read_text()}")
