"""A projector stopped while it waits for NATS ends, even when the connection attempt swallows a cancel.

nats-py's connect loop closes the failed attempt inside its own ``except`` block; a cancel that lands
while that close awaits its tasks can be taken as theirs and lost, and the loop tries the next server as
if nothing had happened. The projector process (`claimlog projector`) must end on SIGTERM all the same.
"""

from __future__ import annotations

import asyncio

from services.orchestration import projector_process
from services.orchestration.projector_process import ProjectorService
from services.runtime.settings import Settings


async def test_a_stop_while_connecting_ends_the_wait_though_the_first_cancel_is_swallowed(monkeypatch):
    attempts = []

    async def connect_swallowing_one_cancel(*args, **kwargs):  # noqa: ANN002, ANN003 - stands in for servers.connect
        swallowed = False
        while True:  # the server never answers
            attempts.append(1)
            try:
                await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                if swallowed:
                    raise
                swallowed = True  # lost, as inside nats-py's close of a failed attempt

    monkeypatch.setattr(projector_process, "connect", connect_swallowing_one_cancel)
    service = ProjectorService(Settings(), "nats://127.0.0.1:1")
    connecting = asyncio.create_task(service._connect())
    await asyncio.sleep(0.2)
    service.stop()
    async with asyncio.timeout(10):
        assert await connecting is None
    assert attempts
