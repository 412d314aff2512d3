"""An upgrade from the previous release: its data directory, written by its own ``claimlog up``, started by
this checkout's. The previous release (the newest in releases.toml) is installed from its own lock into a
scratch worktree of this repository (CI runs in a full clone, so its commit is there).

First the refusal: this checkout started with a setting the data directory cannot take refuses, says why,
and changes no file of the data directory, so the previous release still starts on it (rollback). Then the
upgrade itself: the same pages."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from tests.lifecycle.registry import Registry, Snapshot, directory_hashes
from tests.lifecycle.workload import claim_ids, drafted_with_sources, post_all, reviewed_and_disputed

pytestmark = [pytest.mark.lifecycle, pytest.mark.timeout(600)]  # a step may start, write and stop a registry
REPOSITORY = Path(__file__).resolve().parents[2]
CLAIMS = claim_ids(200000, 300)
# The nats-server's own diagnostic log in the data directory. Telling the stream's partitions takes the server
# (they are in the stream's configuration), and every start of it appends there, a refused one too: the
# log may only grow, what it held kept. Every other file must stay byte for byte.
SERVER_LOG = "nats-server.log"


def newest_release() -> dict:
    releases = tomllib.loads((REPOSITORY / "releases.toml").read_text())["release"]
    return max(releases, key=lambda release: tuple(int(part) for part in release["version"].split(".")))


def run(*argv: str | Path, cwd: Path, timeout: float = 900) -> None:
    done = subprocess.run([str(arg) for arg in argv], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(map(str, argv))}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"


@pytest.fixture(scope="module")
def previous_release(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The previous release's ``claimlog``, installed as its README installs it, from its own lock."""
    release = newest_release()
    checkout = tmp_path_factory.mktemp("previous-release") / release["version"]
    run("git", "worktree", "add", "--detach", checkout, release["commit"], cwd=REPOSITORY)
    try:
        run(sys.executable, "-m", "venv", checkout / ".venv", cwd=checkout)
        pip = checkout / ".venv" / "bin" / "pip"
        run(pip, "install", "--quiet", "--require-hashes", "-r", "requirements/runtime.lock", cwd=checkout)
        run(pip, "install", "--quiet", "--no-deps", "-e", ".", cwd=checkout)
        yield checkout / ".venv" / "bin" / "claimlog"
    finally:
        run("git", "worktree", "remove", "--force", checkout, cwd=REPOSITORY)


@dataclass(frozen=True)
class Left:
    """A data directory the previous release left: where, its head, and what a reader saw there."""

    home: Path
    head: int
    seen: Snapshot


@pytest.fixture(scope="module")
def left_by_the_previous_release(previous_release: Path, tmp_path_factory: pytest.TempPathFactory) -> Left:
    """The previous release's ``claimlog up``, written to through ``claimlog ingest`` and the API, then stopped."""
    old = Registry(tmp_path_factory.mktemp("upgraded"), claimlog=previous_release)
    try:
        old.start()
        pipeline = old.token("pipeline", "model", "--model", "pipeline-1")
        report = old.ingest(drafted_with_sources(CLAIMS), pipeline)
        assert (report["accepted"], report["rejected"]) == (4 * len(CLAIMS), [])
        post_all(old.base, old.token("ada"), reviewed_and_disputed(CLAIMS))
        head = old.caught_up()
        seen = old.snapshot()
        old.stop()
    finally:
        old.close()
    return Left(old.home, head, seen)


def test_settings_the_data_directory_cannot_take_are_refused_changing_nothing_and_the_previous_release_still_starts(
    left_by_the_previous_release: Left, previous_release: Path
):
    left = left_by_the_previous_release
    data_dir = left.home / ".claimlog"
    before, server_log = directory_hashes(data_dir), (data_dir / SERVER_LOG).read_bytes()
    code, said = Registry(left.home, settings={"CLAIMLOG_PARTITIONS": "4"}).up_until_it_ends()
    assert code != 0, said
    assert "in 16 partitions, but CLAIMLOG_PARTITIONS is 4" in said
    after = directory_hashes(data_dir)
    assert {path: digest for path, digest in after.items() if path != SERVER_LOG} == {
        path: digest for path, digest in before.items() if path != SERVER_LOG
    }
    assert (data_dir / SERVER_LOG).read_bytes().startswith(server_log)

    rollback = Registry(left.home, claimlog=previous_release)
    try:
        rollback.start()
        assert rollback.caught_up() == left.head
        assert rollback.snapshot() == left.seen
        rollback.stop()
    finally:
        rollback.close()


def test_the_previous_release_data_directory_starts_on_this_one_with_the_same_pages(left_by_the_previous_release: Left):
    left = left_by_the_previous_release
    upgraded = Registry(left.home)
    try:
        upgraded.start()
        # This release keeps the key registry's history in the log: at its first start on a registry whose
        # log holds none, it records the registry's keys once, one message past the previous head.
        assert upgraded.caught_up() == left.head + RECORDED_REGISTRY
        seen = upgraded.snapshot()
        # The scorecard says how far the log is applied: this release counts a partition with nothing
        # beyond its checkpoint as caught up, so it says the head; the previous one may name the lowest
        # partition checkpoint. Everything else a reader sees is the same.
        assert seen.scorecard["applied_seq"] == left.head + RECORDED_REGISTRY
        # Fields this release added (CHANGELOG.md: added, never renamed) are not the previous one's to show.
        now = replace(seen, scorecard=_apart_from_position(seen.scorecard))
        before = replace(left.seen, scorecard=_apart_from_position(left.seen.scorecard))
        assert replace(now, listing=_as_shown(now.listing, before.listing), pages=_as_shown(now.pages, before.pages)) == before
        upgraded.stop()
    finally:
        upgraded.close()


RECORDED_REGISTRY = 1  # the one RegistryRecorded a start appends to a log without key-registry changes


def _as_shown(now, before):
    """``now`` with only the fields ``before`` has, at every depth (a field ``before`` has and ``now`` lacks stays missing)."""
    if isinstance(now, dict) and isinstance(before, dict):
        return {key: _as_shown(now[key], before[key]) for key in before if key in now}
    if isinstance(now, list) and isinstance(before, list) and len(now) == len(before):
        return [_as_shown(a, b) for a, b in zip(now, before, strict=True)]
    return now


def _apart_from_position(scorecard: dict) -> dict:
    return {key: value for key, value in scorecard.items() if key != "applied_seq"}
