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


def test_a_pull_no_server_answers_for_starts_the_reader_again():
    from services.log import LogError
    from services.log.consumer import DurableConsumer

    consumer = object.__new__(DurableConsumer)
    consumer._name, consumer._owed, consumer._max_batch = "gone", 10, 10
    with pytest.raises(LogError, match="503"):
        consumer._take(("_INBOX.x", "", b"", {"Status": "503"}), [])


async def test_a_copy_that_outlived_its_deletion_is_deleted_and_made_again():
    # A deletion sent while the cluster had no meta leader is never confirmed and may not happen; the
    # server then refuses the new copy (10012: the start sequence cannot be updated).
    from nats.js.errors import APIError

    from services.log.consumer import DurableConsumer

    calls: list[str] = []

    class Api:
        async def delete_consumer(self, stream: str, name: str) -> None:
            calls.append("delete")

        async def add_consumer(self, stream: str, config) -> None:
            calls.append("add")
            if calls.count("add") == 1:
                raise APIError(code=500, err_code=10012, description="start sequence can not be updated")

    class Nc:
        def jetstream(self, **_):
            return Api()

        def new_inbox(self) -> str:
            return "_INBOX.test"

    consumer = DurableConsumer(Nc(), "CLAIMS", "reader")
    import services.log.consumer as module

    async def plain(nc, subject, callback):
        return object()

    original, module.subscribe_plain = module.subscribe_plain, plain
    try:
        await consumer.start(5)
    finally:
        module.subscribe_plain = original
    assert calls == ["delete", "add", "delete", "add"]
