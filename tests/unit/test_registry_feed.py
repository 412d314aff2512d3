"""The registry streams' shared feed: every notice merged once, one message a period, and a stream that fell
too far behind told to reload."""

from __future__ import annotations

import asyncio

from services.read_api.live_hub import KEPT, RegistryFeed


async def test_notices_within_a_period_make_one_message_and_a_late_stream_reloads():
    feed = RegistryFeed(every=0.01)
    feed.offer({"CLM-0001": 3}, 3)
    feed.offer({"CLM-0002": 5, "CLM-0001": 4}, 5)
    await asyncio.wait_for(feed.wait(0), 1)
    assert [(m.claims, m.through) for m in feed.since(0)] == [({"CLM-0001": 4, "CLM-0002": 5}, 5)]
    assert feed.since(0)[0].raw == '{"claims":{"CLM-0001":4,"CLM-0002":5},"through":5}'
    for seq in range(6, 6 + KEPT + 1):
        feed.offer({"CLM-0003": seq}, seq)
        await asyncio.wait_for(feed.wait(feed.version), 1)
    assert feed.since(0) is None  # its first unsent message is no longer kept
    assert [m.through for m in feed.since(feed.version - 1)] == [6 + KEPT]
