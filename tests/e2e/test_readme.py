"""The README is executable: its quick-start commands run against a real `claimlog up`; the reference it links
to names real settings, commands and tests."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import typer

from services.runtime.settings import Settings
from tests.e2e.test_up import free_port, wait_for_page

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
OPERATIONS = (ROOT / "docs" / "operations.md").read_text()
CLI = (ROOT / "docs" / "cli.md").read_text()


def console_commands() -> list[str]:
    """Every `$ ...` line of the README's console blocks, without trailing comments."""
    blocks = re.findall(r"```console\n(.*?)```", README, flags=re.S)
    return [line[2:].split("  #")[0].strip() for block in blocks for line in block.splitlines() if line.startswith("$ ")]


def session_commands() -> list[str]:
    """The lines of the README's shell session (the write quick start), run in one shell."""
    blocks = re.findall(r"```shell-session\n(.*?)```", README, flags=re.S)
    return [line[2:] for block in blocks for line in block.splitlines() if line.startswith("$ ")]


def test_the_quick_start_commands_work_against_a_running_claimlog(tmp_path: Path):
    commands = console_commands()
    assert commands[:2] == ["make run", "make test"]
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAIMLOG_")}
    up = subprocess.Popen(
        [sys.executable, "-m", "services.cli", "up", "--sample", "--port", str(port)],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_page(f"http://127.0.0.1:{port}/claims/CLM-0338", up)
        for command in commands[2:]:
            argv = shlex.split(command.replace("127.0.0.1:8000", f"127.0.0.1:{port}"))
            if argv[0] == "curl":
                response = httpx.get(argv[-1], timeout=5)
                assert response.status_code == 200, command
                assert response.json(), command
            else:
                assert argv[0].endswith("claimlog"), command
                result = subprocess.run(
                    [sys.executable, "-m", "services.cli", *argv[1:]], cwd=tmp_path, env=env,
                    capture_output=True, text=True, timeout=60,
                )
                assert result.returncode == 0, result.stderr
                assert "0 pages published (0 events), 3 already in the log" in result.stderr
        script = "\n".join(session_commands()).replace("127.0.0.1:8000", f"127.0.0.1:{port}")
        script = script.replace(".venv/bin/claimlog", f"{shlex.quote(sys.executable)} -m services.cli")
        session = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env={**env, "PYTHONPATH": str(ROOT)},
            capture_output=True, text=True, timeout=60,
        )
        assert session.returncode == 0, session.stderr
        written, _, page = session.stdout.partition('"last_seq":24}')  # curl prints the two bodies back to back
        assert '"command":"file_disagreement"' in written, session.stdout
        assert "Two backbones are too few" in page, session.stdout
        assert "the same page" in page, session.stdout  # the entered page's text came back as it was written
        entered = (tmp_path / "PAGE.txt").read_text()
        assert entered.startswith("my-first-page CLM-0632") and "CLM-0631" not in entered
        assert httpx.get(f"http://127.0.0.1:{port}/claims/my-first-page").json()["claim_id"] == "CLM-0632"
        disagreement = httpx.get(f"http://127.0.0.1:{port}/claims/CLM-0338").json()["disagreements"][0]
        assert disagreement["filed"]["by"] == {"id": "grace", "kind": "person", "model": None}
    finally:
        up.send_signal(signal.SIGTERM)
        up.wait(timeout=30)


def test_every_setting_in_the_operations_page_exists_and_every_setting_is_there():
    # Not settings: the test suite's PostgreSQL, and `claimlog ingest --token` read from the environment.
    documented = set(re.findall(r"`CLAIMLOG_([A-Z_]+)`", OPERATIONS)) - {"TEST_POSTGRES_URL", "TOKEN"}
    fields = {name.upper() for name in Settings.model_fields}
    assert documented == fields


def cli_commands() -> set[str]:
    """Every command path of the `claimlog` app: `verify`, `actors`, `actors add`, ..."""
    from services.cli import app as cli_app
    def walk(group, prefix: str) -> Iterator[str]:
        for name, command in group.commands.items():
            yield prefix + name
            if hasattr(command, "commands"):
                yield from walk(command, f"{prefix}{name} ")

    return set(walk(typer.main.get_command(cli_app), ""))


def _longest_command(path: str) -> str:
    """The longest leading words of ``path`` that name a command (the rest are its arguments)."""
    words = path.split()
    for n in range(len(words), 1, -1):
        if " ".join(words[:n]) in cli_commands():
            return " ".join(words[:n])
    return words[0]


def test_the_cli_page_documents_every_command_and_only_commands_that_exist():
    documented = {_longest_command(path) for path in re.findall(r"`claimlog ([a-z][a-z-]*(?: [a-z][a-z-]*){0,2})", CLI)}
    assert documented <= cli_commands(), documented - cli_commands()
    groups = {" ".join(path.split()[:n]) for path in cli_commands() for n in range(1, len(path.split()))}
    assert cli_commands() - groups <= documented, (cli_commands() - groups) - documented


def test_every_test_the_docs_cite_exists():
    """Citations look like `tests/faults/test_x.py::test_y`, `test_x.py::test_y` (an integration test),
    `::test_z` (another test of the file cited just before, in the same cell) or a whole file."""
    cited = 0
    for document in (README, *(path.read_text() for path in sorted((ROOT / "docs").glob("*.md")))):
        for cell in document.split("|"):
            path = None
            for directory, file, name in re.findall(r"`(?:(tests/[a-z0-9]+)/)?(test_[a-z0-9_]+\.py)?(?:::(test_[a-z0-9_]+))?`", cell):
                if file:
                    path = ROOT / (directory or "tests/integration") / file
                    assert path.is_file(), f"{path.relative_to(ROOT)} is cited but does not exist"
                    cited += 1
                if name:
                    assert path is not None, f"::{name} is cited without a file before it"
                    assert f"def {name}(" in path.read_text(), f"{path.relative_to(ROOT)}::{name}"
                    cited += 1
    assert cited >= 40, f"only {cited} citations found: has the docs' way of citing tests changed?"
