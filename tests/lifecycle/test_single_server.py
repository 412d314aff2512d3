"""The life-cycle story on the embedded default: ``claimlog up`` on a data directory of its own (one
nats-server, SQLite), stopped by SIGTERM as a service manager stops it."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

from tests.lifecycle.registry import Registry
from tests.lifecycle.story import LifeCycle

pytestmark = [pytest.mark.lifecycle, pytest.mark.timeout(600)]  # a step may start, write and stop a registry


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    running = Registry(tmp_path_factory.mktemp("single-server"))
    try:
        running.start()
        yield running
    finally:
        running.close()


@pytest.fixture(scope="module")
def target_settings() -> dict[str, str]:
    """A fresh cluster to restore into keeps its read models in its data directory's SQLite, as here."""
    return {}


class TestSingleServer(LifeCycle):
    stop_signal = signal.SIGTERM
