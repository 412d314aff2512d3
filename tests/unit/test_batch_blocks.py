"""An atomic batch handed to the connection in one write is, byte for byte, what nats-py sends when each of
its messages is published on its own with the same headers."""

from __future__ import annotations

import random
import uuid

import pytest
from nats.aio.client import Client

from events import encode
from events.subjects import DEFAULT_LAYOUT, LogLayout
from services.log.batches import AtomicBatches, ClaimShare
from services.log.connection import FastHeadersClient
from tests.builders.workload import claim_events


async def sent(client: Client, shares: list[ClaimShare], layout: LogLayout, monkeypatch: pytest.MonkeyPatch) -> bytes:
    """The bytes ``client`` hands its socket for one batch (no server: the client counts as connected and the commands are caught)."""
    commands: list[bytes] = []
    client._status = Client.CONNECTED

    async def catch(command: bytes, priority: bool = False) -> None:
        commands.append(command)

    client._send_command = catch
    monkeypatch.setattr(uuid, "uuid4", lambda: uuid.UUID(int=0xABC))
    batches = AtomicBatches(client, "CLAIMS", layout=layout)
    batches._prefix = "_INBOX.fixed"
    await batches.send(shares)
    return b"".join(commands)


@pytest.mark.parametrize("layout", [DEFAULT_LAYOUT, LogLayout(partitions=0)])
async def test_a_batch_in_one_write_is_what_nats_py_sends_message_by_message(layout: LogLayout, monkeypatch: pytest.MonkeyPatch):
    rng = random.Random(3)
    shares = [
        ClaimShare(events[0].claim_id, expected_seq=seq, linked=[(event, encode(event)) for event in events])
        for seq, events in ((0, claim_events(1, 3, rng)), (41, claim_events(2, 1, rng)), (7, claim_events(3, 2, rng)))
    ]
    fast = await sent(FastHeadersClient(), shares, layout, monkeypatch)
    assert fast == await sent(Client(), shares, layout, monkeypatch)
    assert fast.count(b"HPUB ") == 6 and fast.count(b"Nats-Batch-Commit: 1") == 1
    assert fast.count(b"Nats-Expected-Last-Subject-Sequence: ") == 3 and b"Nats-Expected-Last-Subject-Sequence: 41\r\n" in fast
