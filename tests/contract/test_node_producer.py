"""A producer in another language: the Node.js example writes events claimlog stores, chains, validates, attributes
to its signature and projects."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from urllib.parse import quote

import pytest
from jsonschema import Draft202012Validator
from sqlalchemy import Engine, func, select

from events import Actor
from projections.registry import build_projections
from projections.tables import unreadable_events
from services.log import ClaimLog, StoredEvent, StreamSpec, connect, event_hash
from services.log.signing import SIGNER, Signer
from services.log.writer import message_id
from services.projector import Projector
from services.read_api.queries import claim_page
from services.runtime.db import make_engine, upgrade
from services.runtime.embedded import EmbeddedNats, nats_server_binary
from services.runtime.processes import terminate
from tests.contract.signing_vectors import VECTORS, build
from tests.integration.audit_log import claimlog, verify_json

ROOT = Path(__file__).resolve().parents[2]
NODE_PRODUCER = ROOT / "examples" / "node-producer"
SCHEMAS = ROOT / "schemas" / "events"
NODE_ACTOR = Actor(id="node-producer", kind="service")

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or shutil.which("npm") is None, reason="the Node.js producer needs node and npm"
)


@pytest.fixture(scope="session")
def producer_script() -> Path:
    """The producer, its locked npm packages installed once (``npm ci``) if they are missing."""
    if not (NODE_PRODUCER / "node_modules" / "nats").is_dir():
        done = subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund"], cwd=NODE_PRODUCER, capture_output=True, text=True, timeout=300
        )
        if done.returncode != 0:
            pytest.fail(f"npm ci in {NODE_PRODUCER} failed:\n{done.stdout}\n{done.stderr}")
    return NODE_PRODUCER / "producer.mjs"


@pytest.fixture
def sqlite_engine(tmp_path: Path) -> Iterator[Engine]:
    """A migrated SQLite read-model database."""
    engine = make_engine(f"sqlite:///{tmp_path / 'read-models.sqlite3'}")
    upgrade(engine)
    yield engine
    engine.dispose()


async def run_producer(script: Path, url: str, claim_id: str, key: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The producer as a process, signing with the key file given (CLAIMLOG_SIGNING_KEY) or unsigned."""
    env = {name: value for name, value in os.environ.items() if name != "CLAIMLOG_SIGNING_KEY"}
    if key is not None:
        env["CLAIMLOG_SIGNING_KEY"] = str(key)
    command = ["node", str(script), url, claim_id]
    return await asyncio.to_thread(subprocess.run, command, capture_output=True, text=True, timeout=60, env=env)


async def produce(script: Path, url: str, claim_id: str, key: Path | None = None) -> dict:
    done = await run_producer(script, url, claim_id, key)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


async def test_the_node_producers_claim_and_source_are_projected_with_who_brought_them(
    producer_script: Path, nats_url: str, claim_log: ClaimLog, sqlite_engine: Engine, claim_id: str
):
    printed = await produce(producer_script, nats_url, claim_id)
    projector = Projector(claim_log, sqlite_engine, build_projections(), name="projector", batch=100)
    await projector.run_until(await claim_log.head())
    draft, source = await claim_log.read_claim(claim_id)
    with sqlite_engine.connect() as conn:
        page = claim_page(conn, claim_id)
        unreadable = conn.execute(select(func.count()).select_from(unreadable_events)).scalar()
    assert unreadable == 0
    assert page.statement == json.loads(draft.data)["statement"]
    assert page.statement.startswith("Chain-of-thought prompting")
    assert page.notes.drafted.by == NODE_ACTOR and page.notes.drafted.seq == printed["drafted"]["seq"]
    assert [(s.source_id, s.relation, s.state) for s in page.sources] == [("node-s1", "supports", "active")]
    assert page.sources[0].brought.by == NODE_ACTOR
    assert page.sources[0].brought.seq == printed["source_attached"]["seq"] == source.seq
    assert page.counts.sources_active == 1


async def test_the_node_producer_chains_each_event_to_the_stored_bytes_before_it(
    producer_script: Path, nats_url: str, claim_log: ClaimLog, claim_id: str
):
    printed = await produce(producer_script, nats_url, claim_id)
    draft, source = await claim_log.read_claim(claim_id)
    assert (draft.seq, source.seq) == (printed["drafted"]["seq"], printed["source_attached"]["seq"])
    assert (draft.event.event_id, source.event.event_id) == (printed["drafted"]["event_id"], printed["source_attached"]["event_id"])
    # The message id is derived from the actor, the claim and the event id, as claimlog's own writer derives it.
    assert (draft.msg_id, source.msg_id) == (message_id(draft.event), message_id(source.event))
    assert (draft.msg_id, source.msg_id) == (printed["drafted"]["msg_id"], printed["source_attached"]["msg_id"])
    assert draft.signature is None and source.signature is None  # no CLAIMLOG_SIGNING_KEY: unsigned
    assert "prev_hash" not in json.loads(draft.data)
    assert json.loads(source.data)["prev_hash"] == event_hash(draft.data) == source.event.prev_hash
    assert (await claim_log.claim_head(claim_id)).hash == event_hash(source.data)


async def test_the_node_producers_events_match_the_committed_json_schemas(
    producer_script: Path, nats_url: str, claim_log: ClaimLog, claim_id: str
):
    await produce(producer_script, nats_url, claim_id)
    stored = await claim_log.read_claim(claim_id)
    stored_as = claim_log.layout.stored_subject  # published plainly, stored in the claim's partition by the server
    assert [s.subject for s in stored] == [stored_as(claim_id, "ClaimDrafted"), stored_as(claim_id, "SourceAttached")]
    for event in stored:
        check_against_committed_schema(event)


def check_against_committed_schema(stored: StoredEvent) -> None:
    document = json.loads(stored.data)
    schema = json.loads((SCHEMAS / f"{document['type']}.json").read_text())
    problems = [error.message for error in Draft202012Validator(schema).iter_errors(document)]
    assert problems == [], f"{stored.subject}: {problems}"
    assert document["schema_version"] == 1 and document["actor"] == NODE_ACTOR.model_dump(exclude_none=True)
    # jsonschema checks "format": "date-time" only with an optional package, so check it here.
    assert datetime.fromisoformat(document["occurred_at"]).utcoffset() == timedelta(0)
    assert int(document["event_id"][14], 16) == 7, "event ids are UUIDv7"


async def test_a_refused_publish_ends_the_producer_with_the_reason_and_writes_nothing(
    producer_script: Path, nats_url: str, claim_log: ClaimLog, claim_id: str
):
    await produce(producer_script, nats_url, claim_id)
    again = await run_producer(producer_script, nats_url, claim_id)
    assert again.returncode == 1 and again.stdout == ""
    assert f"ClaimDrafted for {claim_id} refused" in again.stderr
    assert "another writer got there first" in again.stderr
    assert len(await claim_log.read_claim(claim_id)) == 2


USER, PASSWORD = "producer", "p@ss:w/rd"


@pytest.fixture
def nats_with_password(tmp_path: Path) -> Iterator[str]:
    """A nats-server of this test's own that requires a user and password; its URL carries neither."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = tmp_path / "password.conf"
    store = json.dumps(str(tmp_path / "password-jetstream"))
    auth = json.dumps({"user": USER, "password": PASSWORD})
    config.write_text(f'listen: "127.0.0.1:{port}"\njetstream {{ store_dir: {store} }}\nauthorization {auth}\n')
    server = subprocess.Popen([str(nats_server_binary()), "-c", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(server, port)
        yield f"nats://127.0.0.1:{port}"
    finally:
        terminate(server)


def wait_for_port(server: subprocess.Popen, port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while server.poll() is None and time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.02)
    pytest.fail(f"nats-server with a password did not listen on port {port} (exit code {server.poll()})")


async def test_the_node_producer_takes_user_and_password_from_the_url(
    producer_script: Path, nats_with_password: str, claim_id: str
):
    nc = await connect(nats_with_password, user=USER, password=PASSWORD)
    try:
        claim_log = ClaimLog(nc, StreamSpec("CLAIMS"))
        await claim_log.ensure()
        with_password = nats_with_password.replace("nats://", f"nats://{USER}:{quote(PASSWORD, safe='')}@")
        await produce(producer_script, with_password, claim_id)
        assert len(await claim_log.read_claim(claim_id)) == 2
        wrong = nats_with_password.replace("nats://", f"nats://{USER}:wrong@")
        refused = await run_producer(producer_script, wrong, claim_id)
        assert refused.returncode == 1 and "authorization violation" in refused.stderr.lower()
    finally:
        await nc.close()


async def test_the_node_producer_writes_as_the_producer_role_of_claimlogs_own_server(
    producer_script: Path, tmp_path: Path, claim_id: str
):
    """The documented user for a direct producer: it may publish its registry's events and read the claim's
    head, and gets its answers under its own inbox prefix (a reply to the default ``_INBOX`` is refused)."""
    with EmbeddedNats(tmp_path / "nats") as server:
        admin = await connect(server.url_for("admin"))
        try:
            claim_log = ClaimLog(admin, StreamSpec("CLAIMS"))
            await claim_log.ensure()
            printed = await produce(producer_script, server.url_for("producer"), claim_id)
            stored = await claim_log.read_claim(claim_id)
            assert [s.seq for s in stored] == [printed["drafted"]["seq"], printed["source_attached"]["seq"]]
            assert json.loads(stored[1].data)["prev_hash"] == event_hash(stored[0].data)
        finally:
            await admin.close()


# What the Node producer's contract.mjs computes for the committed vectors, printed as the vectors file holds it.
NODE_VECTORS = """
import { readFileSync } from "node:fs";
import { eventHash, messageId, signatureHeaders, signerFromPem } from "./contract.mjs";
const vectors = JSON.parse(readFileSync(process.argv[1], "utf8"));
const signer = signerFromPem(vectors.key.pem);
const datas = vectors.events.map((event) => Buffer.from(event.data, "utf8"));
console.log(JSON.stringify({
  key: { pem: vectors.key.pem, key_id: signer.keyId },
  events: vectors.events.map(({ data }, i) => ({ data, hash: eventHash(datas[i]), message_id: messageId(JSON.parse(data)) })),
  sets: vectors.sets.map(({ size }) => ({ size, headers: signatureHeaders(signer, datas.slice(0, size)) })),
}));
"""


def test_the_committed_vectors_are_what_claimlogs_python_code_computes():
    assert json.loads(VECTORS.read_text()) == build(), (
        f"{VECTORS.name} is stale: rewrite it with .venv/bin/python -m tests.contract.signing_vectors"
    )


def test_the_node_producer_computes_the_hashes_message_ids_and_signatures_of_the_vectors(producer_script: Path):
    done = subprocess.run(
        ["node", "--input-type=module", "-e", NODE_VECTORS, str(VECTORS)],
        cwd=producer_script.parent, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    computed, expected = json.loads(done.stdout), json.loads(VECTORS.read_text())
    assert computed["key"] == expected["key"]
    for ours, theirs in zip(computed["events"], expected["events"], strict=True):
        assert ours == theirs, ours["data"][:60]
    for ours, theirs in zip(computed["sets"], expected["sets"], strict=True):
        assert ours == theirs, f"a signed set of {theirs['size']}"


@pytest.fixture
async def signing_registry(tmp_path: Path) -> AsyncIterator[tuple[EmbeddedNats, ClaimLog, Path]]:
    """claimlog's own server with the Node producer's key registered (``claimlog actors key add``, the
    private key in a PEM file) and signatures required from the log's head on (``claimlog actors key require``)."""
    with EmbeddedNats(tmp_path / "nats") as server:
        admin = await connect(server.url_for("admin"))
        try:
            claim_log = ClaimLog(admin, StreamSpec("CLAIMS"))
            await claim_log.ensure()
            key = tmp_path / "node-producer.pem"
            for command in (("actors", "key", "add", NODE_ACTOR.id, "--out", str(key)), ("actors", "key", "require")):
                done = claimlog(*command, nats_url=server.url_for("admin"), cwd=tmp_path)
                assert done.returncode == 0, done.stderr
            yield server, claim_log, key
        finally:
            await admin.close()


async def test_the_node_producers_signed_events_are_folded_and_verify_clean_when_signatures_are_required(
    producer_script: Path, signing_registry: tuple[EmbeddedNats, ClaimLog, Path], sqlite_engine: Engine, tmp_path: Path, claim_id: str
):
    server, claim_log, key = signing_registry
    printed = await produce(producer_script, server.url_for("producer"), claim_id, key)
    stored = await claim_log.read_claim(claim_id)
    assert [s.seq for s in stored] == [printed["drafted"]["seq"], printed["source_attached"]["seq"]]
    assert {s.signature[SIGNER] for s in stored} == {Signer.from_file(key).key_id}
    await Projector(claim_log, sqlite_engine, build_projections(), name="projector", batch=100).run_until(await claim_log.head())
    with sqlite_engine.connect() as conn:
        page = claim_page(conn, claim_id)
        unreadable = conn.execute(select(unreadable_events.c.reason)).scalars().all()
    assert unreadable == []
    assert page.notes.drafted.by == NODE_ACTOR and [s.source_id for s in page.sources] == ["node-s1"]
    code, report = verify_json("--skip-tables", nats_url=server.url_for("admin"), cwd=tmp_path)
    assert code == 0 and report["ok"], report["findings"]
    # The log's first two messages are the key registry's (the Node key added, signatures required after it),
    # then the producer's two events: every event after the requirement signed, none unsigned.
    assert (report["registry_changes"], report["signed_after"], report["unsigned"], report["events"]) == (2, 1, 0, 4)


async def test_a_node_event_signed_with_a_key_the_registry_does_not_hold_is_recorded_as_unreadable(
    producer_script: Path, signing_registry: tuple[EmbeddedNats, ClaimLog, Path], sqlite_engine: Engine, tmp_path: Path, claim_id: str
):
    server, claim_log, _ = signing_registry
    stranger = tmp_path / "stranger.pem"
    stranger.write_bytes(Signer.generate().pem())
    printed = await produce(producer_script, server.url_for("producer"), claim_id, stranger)
    await Projector(claim_log, sqlite_engine, build_projections(), name="projector", batch=100).run_until(await claim_log.head())
    with sqlite_engine.connect() as conn:
        page = claim_page(conn, claim_id)
        rows = {row.seq: row.reason for row in conn.execute(select(unreadable_events)).all()}
    assert page is None
    assert sorted(rows) == [printed["drafted"]["seq"], printed["source_attached"]["seq"]]
    assert all("which the key registry does not hold" in reason for reason in rows.values()), rows
