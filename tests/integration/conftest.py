"""Fixtures of the integration tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy import Engine

from services.log import ClaimLog
from tests.integration.command_api import Api, running_api


@pytest.fixture
async def api(claim_log: ClaimLog, engine: Engine) -> AsyncIterator[Api]:
    """The command API with a projector running, on the test's log and database."""
    async for running in running_api(claim_log, engine):
        yield running
