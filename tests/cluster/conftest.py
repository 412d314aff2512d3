"""A real three-node JetStream cluster of the wheel's nats-server on loopback, one per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from services.local_cluster import LocalCluster


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path / "data", size=3) as running:
        yield running
