"""An operator restores a registry from a backup older than the checkpoint its witness cosigned: the restored
registry's transparency log stops and says why, `claimlog tlog new-identity` starts a new log naming that
checkpoint, and `claimlog audit` verifies the new log and replays its pages, all through the `claimlog` command."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx

from tests.e2e.test_tlog_audit import claimlog
from tests.e2e.test_up import free_port, wait_for_page
from tests.waiting import until_sync

FIRST, SECOND = "registry.test/first", "registry.test/second"


def up(data: Path, port: int, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "services.cli", "up", "--port", str(port)], cwd=data, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stop(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=60) == 0


def checkpoint(base: str) -> tuple[str, int, str]:
    """The served checkpoint's origin, size and whole note ('', 0, '') while there is none."""
    answer = httpx.get(f"{base}/log/checkpoint", timeout=5)
    if answer.status_code != 200:
        return "", 0, ""
    lines = answer.text.split("\n")
    return lines[0], int(lines[1]), answer.text


def cosigned_to_head(base: str, witness: str) -> Callable[[], str]:
    """A condition: the served checkpoint covers the head and carries the witness's cosignature."""
    def covered() -> str:
        head = httpx.get(f"{base}/health", timeout=5).json()["head"]
        _, size, note = checkpoint(base)
        return note if size >= head and f"\u2014 {witness} " in note else ""
    return covered


def drafts(path: Path, count: int) -> Path:
    lines = [{"command": "draft_claim", "claim_id": f"CLM-{7000 + n}", "slug": f"later-{n}", "statement": "S.", "capability": "C",
              "observed_on": "O."} for n in range(count)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_a_registry_restored_from_before_its_witnessed_checkpoint_goes_on_as_a_new_log_an_audit_verifies(tmp_path: Path):
    first, restored = tmp_path / "first", tmp_path / "restored"
    first.mkdir()
    restored.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAIMLOG_")} | {"COLUMNS": "300"}
    made = claimlog("tlog", "init", "--origin", FIRST, cwd=first, env=env)  # the log key first: the witness is told it
    assert made.returncode == 0, made.stderr
    wport = free_port()
    witness = subprocess.Popen(
        [sys.executable, "-m", "services.cli", "witness", "--dir", str(tmp_path / "witness"), "--name", "witness.test/w",
         "--log", made.stdout.strip(), "--port", str(wport)], env=env, stderr=subprocess.PIPE, text=True,
    )
    try:
        wvkey = witness.stderr.readline().split()[1]
        env |= {"CLAIMLOG_TLOG_WITNESSES": f"http://127.0.0.1:{wport} {wvkey}"}
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        registry = up(first, port, env)
        try:
            wait_for_page(f"{base}/claims", registry)
            assert claimlog("ingest", "--sample", cwd=first, env=env).returncode == 0
            until_sync(cosigned_to_head(base, "witness.test/w"), timeout=60, what="a cosigned checkpoint of the sample")
            assert claimlog("backup", str(tmp_path / "backup"), cwd=first, env=env).returncode == 0
            token = claimlog("actors", "add", "tester", "--kind", "person", cwd=first, env=env).stdout.strip().splitlines()[-1]
            later = claimlog("ingest", str(drafts(tmp_path / "later.jsonl", 5)), "--token", token, cwd=first, env=env)
            assert later.returncode == 0, later.stderr
            witnessed = until_sync(cosigned_to_head(base, "witness.test/w"), timeout=60, what="a cosigned checkpoint of later drafts")
        finally:
            stop(registry)
        witnessed_size = int(witnessed.split("\n")[1])

        done = claimlog("restore", str(tmp_path / "backup"), cwd=restored, env=env)
        assert done.returncode == 0, done.stderr
        registry = up(restored, port, env)
        try:
            wait_for_page(f"{base}/claims/CLM-0338", registry)
            health = until_sync(lambda: (h := httpx.get(f"{base}/health", timeout=5).json()).get("transparency_log", {})
                                .get("integrator") == "refused" and h, timeout=60, what="the integrator's refusal in /health")
            assert health["status"] == "degraded"
            assert "restored from a backup older than the last published checkpoint" in health["transparency_log"]["reason"]
        finally:
            stop(registry)

        started = claimlog("tlog", "new-identity", "--origin", SECOND, cwd=restored, env=env)
        said = " ".join(started.stdout.split())
        assert started.returncode == 0, started.stdout + started.stderr
        assert f"its entry 0 names {FIRST} at size {witnessed_size} (from witness http://127.0.0.1:{wport})" in said, said
        again = claimlog("tlog", "new-identity", "--origin", "registry.test/third", cwd=restored, env=env)
        assert again.returncode == 1  # the stored tree has no checkpoint yet: nothing more to succeed from
        vkey = claimlog("tlog", "vkey", cwd=restored, env=env).stdout.strip()
        assert vkey.startswith(SECOND + "+")

        registry = up(restored, port, env)
        try:
            wait_for_page(f"{base}/claims/CLM-0338", registry)
            head = httpx.get(f"{base}/health", timeout=5).json()["head"]
            until_sync(lambda: checkpoint(base)[:2] == (SECOND, head + 1), timeout=60, what="the new log's first checkpoint")
            assert httpx.get(f"{base}/log/vkey", timeout=5).text.strip() == vkey
            audited = claimlog("audit", base, "--key", vkey, "--compare", "--dir", str(tmp_path / "audit"), cwd=tmp_path, env=env)
            told = " ".join(audited.stderr.split())
            assert audited.returncode == 0, audited.stderr
            assert f"{SECOND} succeeds {FIRST}: its entry 0 names that log's checkpoint of size {witnessed_size}" in told, told
            assert "0 differ" in told, told
        finally:
            stop(registry)
    finally:
        witness.terminate()
        witness.wait(timeout=10)
