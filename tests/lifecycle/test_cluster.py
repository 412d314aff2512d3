"""The life-cycle story on a local three-node cluster: ``claimlog up --cluster 3 --workers 2`` with its read
models in a PostgreSQL database of its own, stopped by Ctrl-C (SIGINT)."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

from tests.databases import postgres_database
from tests.lifecycle.registry import Registry
from tests.lifecycle.story import LifeCycle

pytestmark = [pytest.mark.lifecycle, pytest.mark.cluster, pytest.mark.timeout(600)]  # a step may start, write and stop a registry


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    for database_url in postgres_database():
        settings = {"CLAIMLOG_DATABASE_URL": database_url}
        running = Registry(tmp_path_factory.mktemp("cluster"), settings=settings, up=("--cluster", "3", "--workers", "2"))
        try:
            running.start()
            yield running
        finally:
            running.close()


@pytest.fixture(scope="module")
def target_settings() -> Iterator[dict[str, str]]:
    """A fresh cluster to restore into has a fresh PostgreSQL database of its own."""
    for database_url in postgres_database():
        yield {"CLAIMLOG_DATABASE_URL": database_url}


class TestCluster(LifeCycle):
    stop_signal = signal.SIGINT
    processes = 7  # claimlog up, three nats-servers, two projector workers and the API
