"""Subscriptions whose messages go straight from the parser to a plain function (``subscribe_plain``)."""

from __future__ import annotations

import asyncio
import logging

import nats
import pytest

from services.log import connect
from services.log.connection import FastHeadersClient, subscribe_plain


async def _delivered(nc, subject: str, publish: list[bytes], *, failing: bytes | None = None) -> list[bytes]:
    got: list[bytes] = []

    def sink(_subject, _reply, data, _headers) -> None:
        if data == failing:
            raise RuntimeError("this message breaks the handler")
        got.append(data)

    sub = await subscribe_plain(nc, subject, sink)
    for data in publish:
        await nc.publish(subject, data, headers={"Claimlog-Test": "yes"})
    await nc.flush()
    for _ in range(100):
        if len(got) >= len([d for d in publish if d != failing]):
            break
        await asyncio.sleep(0.01)
    await sub.unsubscribe()
    return got


async def test_claimlogs_connections_hand_messages_to_the_function_in_order(nats_url: str):
    nc = await connect(nats_url)
    assert isinstance(nc, FastHeadersClient)
    try:
        assert await _delivered(nc, "plain.order", [b"%d" % n for n in range(500)]) == [b"%d" % n for n in range(500)]
    finally:
        await nc.close()


async def test_any_other_client_gets_the_same_messages_through_a_callback(nats_url: str):
    nc = await nats.connect(nats_url)
    assert not isinstance(nc, FastHeadersClient)
    try:
        assert await _delivered(nc, "plain.other", [b"a", b"b", b"c"]) == [b"a", b"b", b"c"]
    finally:
        await nc.close()


async def test_a_failing_handler_is_logged_and_later_messages_still_arrive(nats_url: str, caplog: pytest.LogCaptureFixture):
    nc = await connect(nats_url)
    try:
        with caplog.at_level(logging.ERROR, logger="services.log.connection"):
            got = await _delivered(nc, "plain.failing", [b"1", b"bad", b"2"], failing=b"bad")
        assert got == [b"1", b"2"]
        assert "handling a message on plain.failing failed" in caplog.text
        assert nc.is_connected
    finally:
        await nc.close()


async def test_after_unsubscribing_the_function_gets_nothing_more(nats_url: str):
    nc = await connect(nats_url)
    try:
        got: list[bytes] = []
        sub = await subscribe_plain(nc, "plain.stop", lambda _subject, _reply, data, _headers: got.append(data))
        await nc.publish("plain.stop", b"before")
        await nc.flush()
        for _ in range(100):
            if got:
                break
            await asyncio.sleep(0.01)
        await sub.unsubscribe()
        # A message published after "after", on the same connection, arrives after it would have.
        behind = asyncio.Event()
        await subscribe_plain(nc, "plain.behind", lambda _subject, _reply, _data, _headers: behind.set())
        await nc.publish("plain.stop", b"after")
        await nc.publish("plain.behind", b"")
        await asyncio.wait_for(behind.wait(), 10)
        assert got == [b"before"]
    finally:
        await nc.close()
