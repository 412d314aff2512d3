"""An append that no one acknowledges says why, asked of the stream, and that a retry of the same events is
safe: a leader that took the request and died leaves the producer with a timeout, not a 503, and the
producer must learn that the log is between leaders, not only that its events may or may not be stored."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator

import nats
import pytest

from services.log import PublishError
from services.log.writer import append
from services.runtime.cluster import free_ports
from services.runtime.embedded import nats_server_binary
from tests.builders import drafted
from tests.conftest import random_claim_id
from tests.waiting import until_sync


@pytest.fixture
def plain_nats() -> Iterator[str]:
    """A real nats-server without JetStream: its API never answers, as while a cluster has no quorum."""
    (port,) = free_ports(1)
    server = subprocess.Popen([str(nats_server_binary()), "-a", "127.0.0.1", "-p", str(port)], stderr=subprocess.DEVNULL)
    try:
        until_sync(lambda: _accepts(port), what="nats-server accepting connections")
        yield f"nats://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(10)


def _accepts(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


async def test_an_append_taken_and_never_acknowledged_says_the_cluster_may_be_electing_and_that_a_retry_is_safe(plain_nats: str):
    nc = await nats.connect(plain_nats)
    try:
        claim = random_claim_id()
        taken = await nc.subscribe("claims.>")  # takes the request and never answers, like a leader killed mid-append
        with pytest.raises(PublishError) as raised:
            await append(nc, "CLAIMS", claim, [drafted(claim)], expected_seq=0, prev_hash=None, timeout=0.5)
        said = str(raised.value)
        assert f"no acknowledgement for claims.{claim}.ClaimDrafted within 0.5s" in said, said
        assert "electing a leader" in said and "may or may not be stored" in said, said
        assert "retry the same events" in said and "safe" in said, said
        assert (await taken.next_msg(timeout=1)).subject == f"claims.{claim}.ClaimDrafted"
    finally:
        await nc.close()
