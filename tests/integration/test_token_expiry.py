"""Tokens that expire and tokens rotated, against a real nats-server: an expired token gets 401 saying when
it expired and publishes nothing; a rotated actor's new token works and its old ones stop after the grace."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from events.envelope import utc_now
from services.identity.actors import ActorStore, NoLiveToken, TokenExpired
from services.identity.expiry import stamp
from services.log import ClaimLog
from tests.conftest import random_claim_id
from tests.integration.command_api import ACTORS, Api, draft


async def test_an_expired_token_gets_401_saying_when_it_expired_and_publishes_nothing(api: Api):
    head = await api.log.head()
    expired_at = utc_now() - timedelta(minutes=1)
    token, record = await api.store.issue(ACTORS["grace"], expires_at=expired_at)
    refused = await api.http.post(
        "/commands/draft_claim", json=draft(random_claim_id()), headers={"Authorization": f"Bearer {token}"}
    )
    assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Bearer")
    assert refused.json() == {
        "error": "token_expired",
        "message": f"the bearer token {record.token_id} expired at {stamp(expired_at)}: ask for a new one "
        "(`claimlog actors rotate grace` issues it)",
    }
    assert await api.log.head() == head
    # The actor's other token, made without an expiry (as every token was before expiries), still works.
    assert (await api.send("draft_claim", "grace", **draft(random_claim_id()))).status_code == 201


async def test_a_token_with_an_expiry_works_until_it_and_not_after(api: Api):
    expires_at = utc_now() + timedelta(days=90)
    token, _ = await api.store.issue(ACTORS["ada"], expires_at=expires_at)
    assert await api.store.authenticate(token) == ACTORS["ada"]
    assert await api.store.authenticate(token, now=expires_at - timedelta(seconds=1)) == ACTORS["ada"]
    with pytest.raises(TokenExpired) as expired:
        await api.store.authenticate(token, now=expires_at)
    assert expired.value.record.expires_at == expires_at


async def test_a_rotated_actor_keeps_its_kind_and_model_and_its_old_token_works_only_for_the_grace(api: Api):
    old = api.tokens["drafter"]
    token, record, previous = await api.store.rotate("drafter", expires_at=utc_now() + timedelta(days=30), grace=timedelta(hours=1))
    assert record.actor == ACTORS["drafter"] and record.expires_at is not None
    assert [r.actor for r in previous] == [ACTORS["drafter"]] and previous[0].revoked_at is None
    api.tokens["drafter"] = token
    assert (await api.send("draft_claim", "drafter", **draft(random_claim_id()))).status_code == 201
    api.tokens["drafter"] = old  # within the grace, the old token still works
    assert (await api.send("draft_claim", "drafter", **draft(random_claim_id()))).status_code == 201
    later = utc_now() + timedelta(hours=1, seconds=1)
    with pytest.raises(TokenExpired):
        await api.store.authenticate(old, now=later)
    assert await api.store.authenticate(token, now=later) == ACTORS["drafter"]


async def test_a_rotation_without_a_grace_revokes_the_old_tokens_at_once(api: Api):
    head = await api.log.head()
    token, record, previous = await api.store.rotate("ada")
    assert record.expires_at is None and record.actor == ACTORS["ada"]
    assert [r.revoked_at is not None for r in previous] == [True]
    refused = await api.send("draft_claim", "ada", **draft(random_claim_id()))
    assert refused.status_code == 401 and "revoked" in refused.json()["message"]
    assert await api.log.head() == head
    api.tokens["ada"] = token
    assert (await api.send("draft_claim", "ada", **draft(random_claim_id()))).status_code == 201


async def test_rotating_an_unknown_actor_or_one_without_a_live_token_says_what_to_type(api: Api):
    with pytest.raises(NoLiveToken, match=r"no actor 'nobody': `claimlog actors list` shows every actor; `claimlog actors add nobody"):
        await api.store.rotate("nobody")
    await api.store.revoke(actor_id="drafter")
    with pytest.raises(NoLiveToken) as refused:
        await api.store.rotate("drafter")
    assert "actor 'drafter' has no live token to rotate" in str(refused.value)
    assert "`claimlog actors add drafter --kind model --model 'drafter-2'` issues a new one" in str(refused.value)


def claimlog(*args: str, cwd: Path, nats_url: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CLAIMLOG_DATA_DIR": str(cwd / ".claimlog"), "CLAIMLOG_NATS_URL": nats_url, "COLUMNS": "250"}
    return subprocess.run([sys.executable, "-m", "services.cli", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=60)


def said(done: subprocess.CompletedProcess[str], code: int) -> str:
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    return " ".join((done.stdout + done.stderr).replace("│", " ").split())


async def test_the_cli_adds_lists_and_rotates_tokens_with_their_expiries(nats_url: str, claim_log: ClaimLog, tmp_path: Path):
    store = await ActorStore.open(claim_log.nc, create=True)
    expired_at = utc_now() - timedelta(days=1)
    _, lapsed = await store.issue(ACTORS["ada"], expires_at=expired_at)
    added = claimlog("actors", "add", "grace", "--expires-in", "90d", cwd=tmp_path, nats_url=nats_url)
    assert "expires " in said(added, 0) and ": shown once, keep it secret" in added.stderr
    old = added.stdout.strip()
    listed = said(claimlog("actors", "list", cwd=tmp_path, nats_url=nats_url), 0)
    assert f"{lapsed.token_id} ada person" in listed and f"{stamp(expired_at)} (expired)" in listed
    expires_at = (await store.records())[-1][1].expires_at
    assert expires_at is not None and f"{stamp(expires_at)} " in listed and listed.count("(expired)") == 1

    rotated = claimlog("actors", "rotate", "grace", "--grace", "1h", "--expires-in", "30d", cwd=tmp_path, nats_url=nats_url)
    assert "old token(s) " in said(rotated, 0) and "(grace 1h)" in rotated.stderr
    new = rotated.stdout.strip()
    assert new != old and await store.authenticate(new) == ACTORS["grace"] == await store.authenticate(old)
    later = utc_now() + timedelta(hours=1, seconds=1)
    with pytest.raises(TokenExpired):
        await store.authenticate(old, now=later)
    assert await store.authenticate(new, now=later) == ACTORS["grace"]

    assert "no actor 'nobody': `claimlog actors list` shows every actor" in said(
        claimlog("actors", "rotate", "nobody", cwd=tmp_path, nats_url=nats_url), 2)
    revoked = said(claimlog("actors", "rotate", "grace", cwd=tmp_path, nats_url=nats_url), 0)
    assert "revoked" in revoked and await store.authenticate(new) is None


async def test_bulk_ingest_with_an_expired_token_is_refused_saying_when_and_publishes_nothing(
    nats_url: str, claim_log: ClaimLog, tmp_path: Path
):
    store = await ActorStore.open(claim_log.nc, create=True)
    expired_at = utc_now() - timedelta(hours=2)
    token, record = await store.issue(ACTORS["bot"], expires_at=expired_at)
    path = tmp_path / "commands.jsonl"
    path.write_text(json.dumps({"command": "draft_claim", **draft(random_claim_id())}) + "\n")
    env = {"CLAIMLOG_TOKEN": token}
    done = subprocess.run(
        [sys.executable, "-m", "services.cli", "ingest", str(path)], cwd=tmp_path, capture_output=True, text=True, timeout=60,
        env={**os.environ, "CLAIMLOG_DATA_DIR": str(tmp_path / ".claimlog"), "CLAIMLOG_NATS_URL": nats_url, **env},
    )
    assert f"the bearer token {record.token_id} expired at {stamp(expired_at)}" in said(done, 2)
    assert await claim_log.head() == 0


async def test_a_rotation_that_read_before_a_revocation_leaves_the_revocation_standing(api: Api, monkeypatch):
    seen = await api.store.records()
    await api.store.revoke(actor_id="grace")
    monkeypatch.setattr(api.store, "records", lambda: _returning(seen))  # the rotation read before the revocation
    _, _, previous = await api.store.rotate("grace", grace=timedelta(hours=1))
    assert previous == []
    assert await api.store.authenticate(api.tokens["grace"]) is None


async def _returning(value):
    return value
