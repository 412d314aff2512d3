"""The story's fixtures, one of each per test module (one deployment): a module provides ``registry`` (running,
nothing written yet) and ``target_settings`` (the settings of a fresh cluster to restore into)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.lifecycle.registry import Registry, wait_until
from tests.lifecycle.story import Backup, Written, revise_the_busy_claim, write_the_registry
from tests.lifecycle.workload import Writer


@pytest.fixture(scope="module")
def written(registry: Registry) -> Written:
    return write_the_registry(registry)


@pytest.fixture(scope="module")
def busy(registry: Registry, written: Written) -> Written:
    """The busy claim's revisions: the last writes before the registry is stopped (the story's tests ask for
    them after the backup's)."""
    return revise_the_busy_claim(registry, written)


@pytest.fixture(scope="module")
def backup(registry: Registry, written: Written, tmp_path_factory: pytest.TempPathFactory) -> Backup:
    """``claimlog backup`` while a writer keeps drafting claims through the API."""
    directory = tmp_path_factory.mktemp("backup") / "backup"
    writer = Writer(registry.base, written.person_token, first=500000)
    writer.start()
    wait_until(lambda: len(writer.written) >= 20, timeout=60, what="the writer writing")
    done = registry.claimlog("backup", str(directory))
    written_by_then = len(writer.written)
    wait_until(lambda: len(writer.written) >= written_by_then + 20, timeout=60, what="the writer writing after the backup")
    during = writer.stop()
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    head = json.loads((directory / "manifest.json").read_text())["head"]
    assert written.head < head < registry.caught_up()  # the backup holds some of the writer's claims, not all
    as_of_head = registry.snapshot(as_of_seq=head)
    listed = {claim["claim_id"] for claim in as_of_head.listing}
    return Backup(directory, head, as_of_head, after_head=[claim_id for claim_id in during if claim_id not in listed])


@pytest.fixture
def fresh_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    """A new data directory, nothing started in it yet."""
    target = Registry(tmp_path_factory.mktemp("fresh-server"))
    try:
        yield target
    finally:
        target.close()


@pytest.fixture
def fresh_cluster(tmp_path_factory: pytest.TempPathFactory, target_settings: dict[str, str]) -> Iterator[Registry]:
    """A new data directory with ``claimlog up --cluster 3`` running in it: an empty registry."""
    target = Registry(tmp_path_factory.mktemp("fresh-cluster"), settings=target_settings, up=("--cluster", "3"))
    try:
        target.start()
        yield target
    finally:
        target.close()
