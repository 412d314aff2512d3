"""Starting a worker's partition consumers together: a passing fault comes out as itself, so the runner retries it."""

from __future__ import annotations

import asyncio

import nats.errors
import pytest

from services.log.consumer import PartitionConsumers


class Member:
    def __init__(self, fails: bool) -> None:
        self.fails, self.started = fails, False

    async def start(self, after: int) -> None:
        await asyncio.sleep(0.01)
        if self.fails:
            raise nats.errors.TimeoutError
        self.started = True


async def test_a_consumer_that_cannot_be_made_raises_its_own_error_once_the_others_are_made():
    consumers = object.__new__(PartitionConsumers)  # the members alone: no server is asked
    consumers.by_partition = {0: Member(fails=False), 1: Member(fails=True), 2: Member(fails=False)}
    with pytest.raises(nats.errors.TimeoutError):
        await consumers.start_each({0: 0, 1: 0, 2: 0})
    assert consumers.by_partition[0].started and consumers.by_partition[2].started
