"""No one writes as someone else, and the API gives away no secret.

Elsewhere: a revoked token stops working at the next request
(``test_commands.py::test_a_write_without_a_valid_token_is_refused_and_publishes_nothing``), and a
client with a read-only NATS user is refused by the server when it publishes to a claim subject
(``test_permissions.py::test_a_reader_or_projector_publishing_a_claim_event_is_refused_by_the_server``).
"""

from __future__ import annotations

import hashlib
import uuid
from urllib.parse import urlsplit

import httpx
import pytest
from sqlalchemy import Engine, create_engine
from sqlalchemy.engine import make_url

import services.identity.actors
from events import Actor
from services.http.app import attach_log, create_app
from services.identity.actors import BUCKET, ActorKindFixed, ActorStore
from services.log import ClaimLog
from tests.conftest import POSTGRES_URL, random_claim_id
from tests.integration.command_api import ACTORS, draft

LEAKS = ("Traceback", "psycopg", "sqlalchemy", "does not exist", "connection failed", 'File "')
READS = (
    "/claims", "/claims/CLM-0338", "/claims/CLM-0338/counts", "/claims/CLM-0338/history", "/claims/CLM-0338/text",
    "/claims/CLM-0338?as_of_seq=1", "/scorecard", "/scorecard/Planning", "/contributors/ada", "/events",
    "/unreadable-events", "/pages/claims", "/pages/claims/CLM-0338", "/pages/scorecard", "/health", "/metrics",
)


async def test_a_token_is_kept_only_as_its_sha256_looked_up_by_it_and_compared_in_constant_time(
    claim_log: ClaimLog, monkeypatch
):
    store = await ActorStore.open(claim_log.nc, create=True)
    token, record = await store.issue(ACTORS["ada"])
    kv = await claim_log.nc.jetstream().key_value(BUCKET)
    stored = {key: (await kv.get(key)).value for key in await kv.keys()}
    assert list(stored) == [f"token.{hashlib.sha256(token.encode()).hexdigest()}"]
    assert all(token.encode() not in key.encode() + value for key, value in stored.items())
    compared = []
    real = services.identity.actors.hmac.compare_digest
    monkeypatch.setattr(services.identity.actors.hmac, "compare_digest", lambda a, b: compared.append((a, b)) or real(a, b))
    assert await store.authenticate(token) == ACTORS["ada"]
    assert compared == [(record.token_id, record.token_id)]
    # A token one character off is another hash: another key, which is not there.
    assert await store.authenticate(token[:-1] + ("A" if token[-1] != "A" else "B")) is None


def _unreachable_database() -> tuple[Engine, str]:
    """An engine on a PostgreSQL database that does not exist, with a password in its URL."""
    password = f"pw-{uuid.uuid4().hex}"
    url = make_url(POSTGRES_URL).set(
        drivername="postgresql+psycopg", password=password, database=f"claimlog_gone_{uuid.uuid4().hex[:8]}"
    )
    return create_engine(url, connect_args={"connect_timeout": 5}), password


async def test_the_api_answers_a_missing_database_and_a_closed_log_without_secrets_or_error_text(
    nats_url: str, claim_log: ClaimLog
):
    engine, db_password = _unreachable_database()
    nats_password = urlsplit(nats_url).password
    store = await ActorStore.open(claim_log.nc, create=True)
    token = (await store.issue(ACTORS["ada"]))[0]
    app = create_app(engine, commands=True, read_wait=0.2)
    attach_log(app, claim_log)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)  # a 500 comes back as a client sees it
    secrets = (db_password, nats_password, token)
    async with httpx.AsyncClient(transport=transport, base_url="http://claimlog") as http:
        answers = [await http.get(path) for path in READS]
        write = {"Authorization": f"Bearer {token}"}
        answers.append(await http.post("/commands/draft_claim", json=draft(random_claim_id()), headers=write))
        await claim_log.nc.close()  # the log goes away too
        answers += [await http.get("/events"), await http.get("/claims/CLM-0338/history")]
        answers.append(await http.post("/commands/draft_claim", json=draft(random_claim_id()), headers=write))
    engine.dispose()
    for answer in answers:
        where = f"{answer.request.method} {answer.request.url.path} -> {answer.status_code}: {answer.text[:500]}"
        assert not any(secret in answer.text or secret in str(answer.headers) for secret in secrets), where
        assert not any(leak in answer.text for leak in LEAKS), where
        assert "://" not in answer.text or answer.request.url.path == "/metrics", where
        if answer.status_code >= 500 and answer.request.url.path != "/health":  # retry later, with the reason
            assert answer.status_code == 503 and answer.json()["error"] in ("database_unavailable", "log_unavailable"), where


async def test_an_actors_kind_never_changes_once_made(claim_log: ClaimLog):
    store = await ActorStore.open(claim_log.nc, create=True)
    await store.issue(Actor(id="mallory", kind="person"))
    await store.revoke(actor_id="mallory")  # revoked tokens still fix the kind
    with pytest.raises(ActorKindFixed, match="mallory.*is a person"):
        await store.issue(Actor(id="mallory", kind="model", model="m-1"))
    assert [r.actor.kind.value for _, r in await store.records()] == ["person"]
    token, _ = await store.issue(Actor(id="mallory", kind="person"))  # another token of the same kind is fine
    assert (await store.authenticate(token)).kind.value == "person"
