"""Two registries on one nats-server, side by side: each its own stream, subject prefix, actors and writer scope."""

from __future__ import annotations

from pathlib import Path

import pytest

from events import Actor
from events.subjects import LogLayout
from services.actors import ActorStore, actors_bucket
from services.log import ClaimLog, PublishError, StreamSpec, connect
from services.runtime.embedded import EmbeddedNats
from tests.builders import attached, drafted
from tests.conftest import random_claim_id


async def test_two_registries_on_one_server_keep_their_events_and_tokens_apart(nats_url: str):
    nc = await connect(nats_url)
    try:
        first = ClaimLog(nc, StreamSpec("CLAIMS"))
        second = ClaimLog(nc, StreamSpec("REG2", layout=LogLayout("reg2", 4)))
        await first.ensure()
        await second.ensure()
        claim = random_claim_id()  # the same claim id in both registries
        await first.append(claim, [drafted(claim)], expected_seq=0, prev_hash=None)
        await second.append(claim, [drafted(claim), attached(claim, "s1")], expected_seq=0, prev_hash=None)
        assert [s.subject for s in await first.read_claim(claim)] == [first.layout.stored_subject(claim, "ClaimDrafted")]
        assert [s.subject.split(".")[0] for s in await second.read_claim(claim)] == ["reg2", "reg2"]
        assert (await first.head(), await second.head()) == (1, 2)

        mine = await ActorStore.open(nc, create=True, stream="CLAIMS")
        theirs = await ActorStore.open(nc, create=True, stream="REG2")
        token, _ = await mine.issue(Actor(id="grace", kind="person"))
        assert actors_bucket("REG2") == "claimlog_actors_REG2" and actors_bucket("CLAIMS") == "claimlog_actors"
        assert (await mine.authenticate(token)).id == "grace"
        assert await theirs.authenticate(token) is None
    finally:
        await nc.close()


async def test_a_registrys_writer_may_publish_its_own_events_only(tmp_path: Path):
    server = EmbeddedNats(tmp_path / "nats", stream="REG2", prefix="reg2")
    server.start()
    try:
        admin = await connect(server.url_for("admin"))
        await ClaimLog(admin, StreamSpec("REG2", layout=LogLayout("reg2", 4))).ensure()
        await ClaimLog(admin, StreamSpec("CLAIMS")).ensure()
        writer = await connect(server.url_for("writer"))
        own = ClaimLog(writer, StreamSpec("REG2", layout=LogLayout("reg2", 4)))
        other = ClaimLog(writer, StreamSpec("CLAIMS"))
        claim = random_claim_id()
        await own.append(claim, [drafted(claim)], expected_seq=0, prev_hash=None)
        with pytest.raises(PublishError):
            await other.append(claim, [drafted(claim)], expected_seq=0, prev_hash=None)
        assert await ClaimLog(admin, StreamSpec("CLAIMS")).head() == 0
        await writer.close()
        await admin.close()
    finally:
        server.stop()
