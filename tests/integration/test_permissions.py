"""Only the writers and producers may write: the embedded nats-server's users and permissions, against the real server."""

from __future__ import annotations

import json
import stat
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import nats
import nats.errors
import pytest
from nats.aio.client import Client
from nats.js.api import KeyValueConfig
from nats.js.errors import NoKeysError
from sqlalchemy import Engine

from events.subjects import LogLayout
from projections.registry import build_projections
from services.identity.keys import KeyRing, load_attribution
from services.log import ClaimLog, LogConfigError, StreamSpec, connect
from services.log.names import SLUGS, bucket_name
from services.log.servers import redact
from services.projector import Projector
from services.read_api.queries import claim_page
from services.runtime.db import make_engine, upgrade
from services.runtime.embedded import EmbeddedNats, running_url
from services.runtime.from_settings import open_log
from services.runtime.nats_roles import ACTORS_BUCKET, ROLES, USERS_FILE, read_passwords, role_passwords
from services.runtime.settings import Settings
from tests.builders import BOT, attached, drafted, history

REFUSED = (nats.errors.TimeoutError, TimeoutError)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedNats]:
    embedded = EmbeddedNats(tmp_path / "nats", sync="always")
    embedded.start()
    yield embedded
    embedded.stop()


@pytest.fixture
async def admin_log(server: EmbeddedNats) -> AsyncIterator[ClaimLog]:
    """The log as admin, with the stream created."""
    nc = await connect(server.url_for("admin"))
    claim_log = ClaimLog(nc, StreamSpec("CLAIMS"))
    await claim_log.ensure()
    yield claim_log
    await nc.close()


@pytest.fixture
def read_models(tmp_path: Path) -> Iterator[Engine]:
    engine = make_engine(f"sqlite:///{tmp_path / 'read-models.sqlite3'}")
    upgrade(engine)
    yield engine
    engine.dispose()


async def as_role(server: EmbeddedNats, role: str) -> ClaimLog:
    return ClaimLog(await connect(server.url_for(role), name=f"test-{role}"), StreamSpec("CLAIMS"))


def permission_refused(nc: Client) -> bool:
    return nc.last_error is not None and "permissions violation" in str(nc.last_error).lower()


@pytest.mark.parametrize("role", ["reader", "projector"])
async def test_a_reader_or_projector_publishing_a_claim_event_is_refused_by_the_server(
    server: EmbeddedNats, admin_log: ClaimLog, claim_id: str, role: str
):
    before = await admin_log.head()
    other = await as_role(server, role)
    try:
        with pytest.raises(REFUSED):
            await other.nc.request(f"claims.{claim_id}.ClaimDrafted", drafted(claim_id).model_dump_json().encode(), timeout=1)
        assert permission_refused(other.nc)
    finally:
        await other.nc.close()
    assert await admin_log.head() == before
    assert await admin_log.read_claim(claim_id) == []


async def test_the_writer_appends_through_the_claim_log(server: EmbeddedNats, admin_log: ClaimLog, claim_id: str):
    writer = await as_role(server, "writer")
    try:
        await writer.ensure()  # the stream exists: this only reads its info
        head = await writer.claim_head(claim_id)
        appended = await writer.append(claim_id, history(claim_id), expected_seq=head.seq, prev_hash=head.hash)
        assert [s.seq for s in await writer.read_claim(claim_id)] == list(range(appended.first_seq, appended.last_seq + 1))
    finally:
        await writer.nc.close()
    assert await admin_log.head() == appended.last_seq


async def test_the_writer_reads_the_actors_bucket_but_may_not_change_it(server: EmbeddedNats, admin_log: ClaimLog):
    bucket = await admin_log.nc.jetstream().create_key_value(KeyValueConfig(bucket=ACTORS_BUCKET, history=4, direct=True))
    first = await bucket.put("token.abc", b"ada")
    await bucket.put("token.abc", b"ada, revoked")
    writer = await as_role(server, "writer")
    try:
        kv = await writer.nc.jetstream(timeout=1).key_value(ACTORS_BUCKET)
        assert (await kv.get("token.abc")).value == b"ada, revoked"
        assert (await kv.get("token.abc", revision=first)).value == b"ada"
        with pytest.raises(REFUSED):
            await kv.put("token.abc", b"mallory")
        assert permission_refused(writer.nc)
    finally:
        await writer.nc.close()
    assert (await bucket.get("token.abc")).value == b"ada, revoked"


async def test_the_projector_role_runs_the_real_projector(
    server: EmbeddedNats, admin_log: ClaimLog, read_models: Engine, claim_id: str
):
    await admin_log.append(claim_id, history(claim_id), expected_seq=0, prev_hash=None)
    projector_log = await as_role(server, "projector")
    try:
        await projector_log.ensure()
        projector = Projector(projector_log, read_models, build_projections(), name="projector", batch=100)
        await projector.run_until(await projector_log.head(), timeout=30)
    finally:
        await projector_log.nc.close()
    with read_models.connect() as conn:
        assert claim_page(conn, claim_id).as_of_seq == await admin_log.head()


async def test_a_role_that_may_not_create_the_missing_stream_says_who_can(server: EmbeddedNats, tmp_path: Path):
    settings = Settings(data_dir=tmp_path, nats_url=server.url_for("projector"))
    with pytest.raises(LogConfigError, match="Run `claimlog up`, or create the stream as admin"):
        async with open_log(settings, role="projector"):
            pass


async def test_a_client_without_credentials_is_refused(server: EmbeddedNats):
    with pytest.raises(nats.errors.Error, match="[Aa]uthorization"):
        await nats.connect(server.url, allow_reconnect=False, connect_timeout=2)


async def test_passwords_persist_across_restarts_in_a_file_only_its_owner_can_read(tmp_path: Path):
    data_dir = tmp_path / "nats"
    with EmbeddedNats(data_dir) as first:
        writer_password = urlsplit(first.url_for("writer")).password
        assert running_url(data_dir, "writer") == first.url_for("writer")
    passwords = read_passwords(data_dir)
    with EmbeddedNats(data_dir) as again:
        assert read_passwords(data_dir) == passwords
        assert urlsplit(again.url_for("writer")).password == writer_password  # a new port, the same password
        nc = await connect(again.url_for("writer"))
        assert nc.is_connected
        await nc.close()
    assert set(passwords) == {"admin", "writer", "producer", "projector", "reader"}
    assert stat.S_IMODE((data_dir / USERS_FILE).stat().st_mode) == 0o600
    assert stat.S_IMODE((data_dir / "nats-server.conf").stat().st_mode) == 0o600


def test_a_data_directory_from_before_the_producer_role_keeps_its_passwords_and_gains_the_producers(tmp_path: Path):
    older = {"admin": "a-secret", "writer": "w-secret", "projector": "p-secret", "reader": "r-secret"}
    (tmp_path / USERS_FILE).write_text(json.dumps(older))
    passwords = role_passwords(tmp_path)
    assert {role: passwords[role] for role in older} == older
    assert len(passwords["producer"]) >= 32 and set(passwords) == set(ROLES)
    assert stat.S_IMODE((tmp_path / USERS_FILE).stat().st_mode) == 0o600


def test_a_redacted_url_shows_the_user_but_not_the_password(server: EmbeddedNats):
    url = server.url_for("writer")
    password = read_passwords(server.data_dir)["writer"]
    assert password in url
    shown = redact(f"{url},{url}")
    assert password not in shown
    assert shown == f"{url},{url}".replace(password, "***")
    assert redact("nats://s3cret-token@nats-1:4222") == "nats://***@nats-1:4222"
    assert redact("nats://nats-1:4222") == "nats://nats-1:4222"


async def spy_on_every_inbox(nc: Client) -> list[bytes]:
    """Subscribe ``nc`` to every reply subject and collect what it gets."""
    seen: list[bytes] = []

    async def keep(msg) -> None:
        seen.append(msg.data)

    await nc.subscribe("_INBOX.>", cb=keep)
    await nc.flush(timeout=2)
    return seen


@pytest.mark.parametrize("spy", ["reader", "projector"])
async def test_no_role_reads_the_writers_token_lookup_replies(server: EmbeddedNats, admin_log: ClaimLog, spy: str):
    bucket = await admin_log.nc.jetstream().create_key_value(KeyValueConfig(bucket=ACTORS_BUCKET, history=4, direct=True))
    await bucket.put("token.abc", b'{"token_id": "abc", "actor": "ada"}')
    spying = await connect(server.url_for(spy), name=f"test-{spy}-spy")
    writer = await as_role(server, "writer")
    try:
        seen = await spy_on_every_inbox(spying)
        kv = await writer.nc.jetstream(timeout=2).key_value(ACTORS_BUCKET)
        assert (await kv.get("token.abc")).value == b'{"token_id": "abc", "actor": "ada"}'
        await spying.flush(timeout=2)
        assert permission_refused(spying)
        assert seen == []
    finally:
        await writer.nc.close()
        await spying.close()


async def test_each_role_answers_come_under_its_own_inbox_prefix(server: EmbeddedNats, admin_log: ClaimLog, claim_id: str):
    await admin_log.append(claim_id, history(claim_id), expected_seq=0, prev_hash=None)
    reader = await as_role(server, "reader")
    try:
        assert reader.nc.new_inbox().startswith("_INBOX.reader.")
        assert [s.seq for s in await reader.read_claim(claim_id)] == list(range(1, len(history(claim_id)) + 1))
        assert not permission_refused(reader.nc)
    finally:
        await reader.nc.close()


async def test_a_raw_client_with_the_default_inbox_gets_no_answer_as_reader(server: EmbeddedNats, admin_log: ClaimLog):
    password = read_passwords(server.data_dir)["reader"]
    raw = await nats.connect(server.url, user="reader", password=password, allow_reconnect=False)
    try:
        with pytest.raises(REFUSED):
            await raw.request("$JS.API.STREAM.INFO.CLAIMS", b"", timeout=1)
        assert permission_refused(raw)
    finally:
        await raw.close()


async def test_a_direct_producer_appends_its_own_signed_events_as_the_producer_user(
    server: EmbeddedNats, admin_log: ClaimLog, claim_id: str, tmp_path: Path
):
    signer, _ = await (await KeyRing.open(admin_log.nc)).add(BOT)
    key_file = tmp_path / "source-bot.pem"
    key_file.write_bytes(signer.pem())
    settings = Settings(data_dir=tmp_path / "producer", nats_url=server.url_for("producer"), signing_key=key_file)
    async with open_log(settings, client_name="test-producer", role="producer") as producer:
        assert producer.nc.new_inbox().startswith("_INBOX.producer.")
        first = await producer.append(claim_id, [drafted(claim_id, actor=BOT)], expected_seq=0, prev_hash=None)
        head = await producer.claim_head(claim_id)  # a direct get of the claim's last message
        await producer.append(claim_id, [attached(claim_id, "s1", actor=BOT)], expected_seq=head.seq, prev_hash=head.hash)
        attribution = await load_attribution(producer.nc)  # the key registry is readable
        assert not permission_refused(producer.nc)
    stored = await admin_log.read_claim(claim_id)
    assert [s.seq for s in stored] == [first.last_seq, first.last_seq + 1]
    assert all(attribution.check(s.seq, s.signature, s.data, s.stored_at, BOT.id).key_id == signer.key_id for s in stored)


async def test_a_direct_producer_may_not_read_the_token_store_or_write_the_shared_buckets(server: EmbeddedNats, admin_log: ClaimLog):
    js = admin_log.nc.jetstream()
    tokens = await js.create_key_value(KeyValueConfig(bucket=ACTORS_BUCKET, history=4, direct=True))
    await tokens.put("token.abc", b'{"token_id": "abc", "actor": "ada"}')
    slugs = await js.create_key_value(KeyValueConfig(bucket=bucket_name(SLUGS), direct=True))
    producer = await connect(server.url_for("producer"), name="test-producer")
    try:
        for subject in (f"$JS.API.STREAM.INFO.KV_{ACTORS_BUCKET}", f"$JS.API.DIRECT.GET.KV_{ACTORS_BUCKET}.$KV.{ACTORS_BUCKET}.token.abc",
                        f"$JS.API.STREAM.MSG.GET.KV_{ACTORS_BUCKET}", f"$KV.{bucket_name(SLUGS)}.some-slug"):
            with pytest.raises(REFUSED):
                await producer.request(subject, b'{"last_by_subj": "$KV.claimlog_actors.token.abc"}', timeout=1)
            assert permission_refused(producer), subject
            assert subject.lower() in str(producer.last_error).lower()
    finally:
        await producer.close()
    with pytest.raises(NoKeysError):
        await slugs.keys()


async def test_a_direct_producer_may_not_publish_outside_its_registrys_claim_subjects(
    server: EmbeddedNats, admin_log: ClaimLog, claim_id: str
):
    other = ClaimLog(admin_log.nc, StreamSpec("REG2", layout=LogLayout("reg2", 4)))
    await other.ensure()
    event = drafted(claim_id, actor=BOT).model_dump_json().encode()
    producer = await connect(server.url_for("producer"), name="test-producer")
    try:
        # another registry's subjects, and a stored subject (past the server's partitioning)
        for subject in (f"reg2.{claim_id}.ClaimDrafted", admin_log.layout.stored_subject(claim_id, "ClaimDrafted")):
            with pytest.raises(REFUSED):
                await producer.request(subject, event, timeout=1)
            assert subject.lower() in str(producer.last_error).lower()
    finally:
        await producer.close()
    assert (await admin_log.head(), await other.head()) == (0, 0)


async def test_only_admin_may_publish_a_change_of_the_key_registry(server: EmbeddedNats, admin_log: ClaimLog):
    """The registry's changes take a claim token of the events' subject space: the writer and the producer,
    allowed every claim's subjects, are refused that one; the admin's key ring appends there."""
    from events.envelope import new_event_id, utc_now
    from events.key_registry import SigningRequired, encode_change

    change = encode_change(SigningRequired(event_id=new_event_id(), occurred_at=utc_now(), required_after=0))
    subject = admin_log.layout.registry_subject("SigningRequired")
    for role in ("writer", "producer"):
        client = await connect(server.url_for(role), name=f"test-{role}")
        try:
            with pytest.raises(REFUSED):
                await client.request(subject, change, timeout=1)
            assert subject.lower() in str(client.last_error).lower()
        finally:
            await client.close()
    assert await admin_log.head() == 0
    await (await KeyRing.open(admin_log.nc, layout=admin_log.layout)).add(BOT)
    assert await admin_log.head() == 1
