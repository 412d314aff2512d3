"""Two registries on one nats-server, side by side: each its own stream, subject prefix, actors and writer scope."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import pytest

from events import Actor
from events.subjects import LogLayout
from services.identity.actors import ActorStore
from services.log import ClaimLog, LogError, PublishError, StreamSpec, connect
from services.log.names import actors_bucket
from services.runtime.embedded import EmbeddedNats, running_url
from services.runtime.nats_roles import ROLES, user_name
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


@pytest.mark.parametrize("role", ["writer", "producer"])
async def test_a_registrys_writer_or_producer_may_publish_its_own_events_only(tmp_path: Path, role: str):
    server = EmbeddedNats(tmp_path / "nats", stream="REG2", prefix="reg2")
    server.start()
    try:
        admin = await connect(server.url_for("admin"))
        await ClaimLog(admin, StreamSpec("REG2", layout=LogLayout("reg2", 4))).ensure()
        await ClaimLog(admin, StreamSpec("CLAIMS")).ensure()
        writer = await connect(server.url_for(role))
        assert writer.new_inbox().startswith(f"_INBOX.{role}_REG2.")
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


async def test_a_registry_on_another_stream_has_nats_users_of_its_own(tmp_path: Path):
    users = {role: user_name(role, "REG2") for role in ROLES}
    assert users == {role: f"{role}_REG2" for role in ROLES}
    assert not set(users.values()) & {user_name(role) for role in ROLES}  # beside the default registry's, on one cluster
    server = EmbeddedNats(tmp_path / "nats", stream="REG2", prefix="reg2")
    server.start()
    try:
        config = (tmp_path / "nats" / "nats-server.conf").read_text()
        assert all(f"{{user: {user}," in config for user in users.values()) and "{user: writer," not in config
        assert running_url(tmp_path / "nats", "writer", "REG2") == server.url_for("writer")
        assert urlsplit(server.url_for("writer")).username == "writer_REG2"
        with pytest.raises(LogError):  # the default registry's user name is not a user here
            await connect(server.url_for("writer").replace("writer_REG2:", "writer:"), first_connect_seconds=2)
    finally:
        server.stop()
