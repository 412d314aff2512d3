"""Every test carries the marker of its folder, so ``-m unit`` (or integration, faults, contract, e2e,
cluster, lifecycle) selects exactly one layer of the suite."""

from __future__ import annotations

import tomllib

import pytest

from tests.conftest import FOLDER_MARKERS, TESTS, folder_marker


def registered_markers() -> set[str]:
    """The markers pyproject.toml registers (``--strict-markers`` refuses any other)."""
    pyproject = tomllib.loads((TESTS.parent / "pyproject.toml").read_text())
    return {line.split(":", 1)[0].split("(", 1)[0] for line in pyproject["tool"]["pytest"]["ini_options"]["markers"]}


def test_every_folder_holding_tests_maps_to_a_registered_marker():
    folders = {path.relative_to(TESTS).parts[0] for path in TESTS.rglob("test_*.py") if len(path.relative_to(TESTS).parts) > 1}
    assert folders == set(FOLDER_MARKERS), "a folder of tests without a marker, or a marker without its folder"
    assert set(FOLDER_MARKERS.values()) <= registered_markers()
    assert len(set(FOLDER_MARKERS.values())) == len(FOLDER_MARKERS), "two folders share a marker"


def test_a_test_file_gets_exactly_the_marker_of_its_folder():
    assert folder_marker(TESTS / "integration" / "test_bulk.py") == "integration"
    assert folder_marker(TESTS / "lifecycle" / "test_upgrade.py") == "lifecycle"
    with pytest.raises(pytest.UsageError, match="FOLDER_MARKERS"):
        folder_marker(TESTS / "elsewhere" / "test_x.py")
    with pytest.raises(pytest.UsageError, match="FOLDER_MARKERS"):
        folder_marker(TESTS / "test_loose.py")


def test_this_collected_test_carries_its_folders_marker_and_no_other(request: pytest.FixtureRequest):
    carried = {mark.name for mark in request.node.iter_markers()} & set(FOLDER_MARKERS.values())
    assert carried == {"unit"}
