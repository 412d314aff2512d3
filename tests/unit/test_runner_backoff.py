"""The projector's runner retries a database outage with backoff (0.1 s doubling to 5 s), and an outage
after it applied events starts the backoff again (services/projector/runner.py)."""

from __future__ import annotations

import asyncio
import logging
import re

import pytest
from sqlalchemy.exc import OperationalError

from services.projector.runner import Runner


class _Outages(Runner):
    """A runner whose every consume fails as a lost database would, applying ``applied[k]`` events first."""

    def __init__(self, applied: list[int], stop: asyncio.Event) -> None:
        self.checkpoint, self._applied, self._stop = 0, list(applied), stop

    async def _consume(self, stop: asyncio.Event) -> None:
        if not self._applied:
            self._stop.set()
            return
        self.checkpoint += self._applied.pop(0)
        raise OperationalError("SELECT 1", {}, Exception("the database went away"))

    def _forget(self) -> None:
        pass


async def test_an_outage_is_retried_with_doubling_waits_and_progress_starts_them_again(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
):
    waits: list[float] = []

    async def no_wait(_stop: asyncio.Event, delay: float) -> None:
        waits.append(delay)

    monkeypatch.setattr("services.projector.runner._sleep_unless", no_wait)
    stop = asyncio.Event()
    with caplog.at_level(logging.WARNING, logger="services.projector.runner"):
        await _Outages([0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0], stop).run(stop)
    assert waits == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0, 0.1, 0.2]
    assert [float(d) for d in re.findall(r"retrying in ([0-9.]+)s", caplog.text)] == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0, 0.1, 0.2]
    assert "retrying at once (it applied events since the last failure)" in caplog.text
