"""Installs are locked and versions are recorded: what `make`, CI and the image install is what was tested."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from typer.testing import CliRunner

from services.cli import app

ROOT = Path(__file__).resolve().parents[2]
LOCKS = {"runtime": (), "test": ("test",), "bench": ("test", "bench")}
GROUP_LOCKS = ("client-generator",)  # pyproject.toml's dependency groups, each locked alone
PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==([^ ;\\]+)", re.MULTILINE)


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _pins(lock: str) -> dict[str, str]:
    text = (ROOT / "requirements" / f"{lock}.lock").read_text()
    return {_normal(name): version for name, version in PIN.findall(text)}


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@pytest.mark.parametrize("lock", sorted([*LOCKS, *GROUP_LOCKS]))
def test_every_declared_dependency_is_locked_at_a_version_it_allows(lock: str) -> None:
    project = _project()
    if lock in GROUP_LOCKS:  # a tool's own environment: its group alone, without claimlog's dependencies
        declared = list(tomllib.loads((ROOT / "pyproject.toml").read_text())["dependency-groups"][lock])
    else:
        declared = list(project["dependencies"])
        for extra in LOCKS[lock]:
            declared += project["optional-dependencies"][extra]
    pins = _pins(lock)
    for line in declared:
        requirement = Requirement(line)
        name = _normal(requirement.name)
        assert name in pins, f"{requirement.name} is declared but not in requirements/{lock}.lock: run `make lock`"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"requirements/{lock}.lock pins {name}=={pins[name]}, which pyproject.toml's {line!r} does not allow: "
            "run `make lock`"
        )


def test_every_locked_package_carries_hashes() -> None:
    for lock in [*LOCKS, *GROUP_LOCKS]:
        text = (ROOT / "requirements" / f"{lock}.lock").read_text()
        blocks = re.split(r"\n(?=[A-Za-z0-9])", text.split("\n", 2)[2])
        for block in blocks:
            if PIN.match(block):
                assert "--hash=sha256:" in block, f"{block.splitlines()[0]} in {lock}.lock has no hash"


def test_the_version_command_prints_the_project_version() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"claimlog {_project()['version']}"


def test_every_recorded_release_names_a_commit_that_carries_its_version() -> None:
    releases = tomllib.loads((ROOT / "releases.toml").read_text()).get("release", [])
    assert releases, "releases.toml records no release"
    for release in releases:
        shown = subprocess.run(
            ["git", "show", f"{release['commit']}:pyproject.toml"], cwd=ROOT, capture_output=True, text=True
        )
        assert shown.returncode == 0, f"release {release['version']}: {shown.stderr.strip()}"
        assert tomllib.loads(shown.stdout)["project"]["version"] == release["version"]
        changelog = (ROOT / "CHANGELOG.md").read_text()
        assert f"## {release['version']} (" in changelog, f"CHANGELOG.md has no entry for {release['version']}"
