"""Fixtures of the integration tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from services.log import ClaimLog
from services.runtime.db import make_engine
from services.runtime.settings import Settings
from services.store.generations import Generations
from tests.conftest import second_migrated_database
from tests.databases import Templates
from tests.integration.command_api import Api, running_api


@pytest.fixture
async def api(claim_log: ClaimLog, engine: Engine) -> AsyncIterator[Api]:
    """The command API with a projector running, on the test's log and database."""
    async for running in running_api(claim_log, engine):
        yield running


@pytest.fixture
def replay_engine(database_url: str, tmp_path: Path, templates: Templates) -> Iterator[Engine]:
    """A second migrated database of the same kind as the test's, for a replay to compare against."""
    for url in second_migrated_database(database_url, tmp_path, templates):
        engine = make_engine(url)
        yield engine
        engine.dispose()


@pytest.fixture
def settings(nats_url: str, database_url: str, engine: Engine, tmp_path: Path) -> Settings:
    """Settings on the test's NATS server and its migrated database."""
    return Settings(nats_url=nats_url, database_url=database_url, data_dir=tmp_path / "data")


@pytest.fixture
def generations(settings: Settings) -> Iterator[Generations]:
    """The read-model generations of the test's database."""
    generations = Generations(settings.resolved_database_url())
    yield generations
    generations.close()
