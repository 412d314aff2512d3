"""Helpers of the audit tests: a log of several claims, the claimlog command, raw publishes around the API."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nats
from sqlalchemy import Engine

from events import Event, encode
from projections.registry import build_projections
from services.log import ClaimLog
from services.log.reader import ClaimReader
from services.log.tlog_store import TlogStore
from services.projector import Projector
from services.tlog.integrator import Integrator
from tests.builders import attached, drafted, filed, history, reviewed, withdrawn
from tests.conftest import random_claim_id
from tlog.note import Ed25519Signer


async def write_claims(claim_log: ClaimLog, count: int = 4) -> list[str]:
    """Several claims' histories, appended interleaved (one event of each claim in turn), some as batches."""
    claims = [random_claim_id() for _ in range(count)]
    plans: dict[str, list[list[Event]]] = {c: [[e] for e in history(c)] for c in claims}
    plans[claims[0]] = [[drafted(claims[0]), attached(claims[0], "s1")], [filed(claims[0], "d1"), reviewed(claims[0])]]
    plans[claims[-1]].append([attached(claims[-1], "s9", "supports"), withdrawn(claims[-1], "s9")])
    heads = {c: (0, None) for c in claims}
    while any(plans.values()):
        for claim in claims:
            if plans[claim]:
                seq, prev = heads[claim]
                done = await claim_log.append(claim, plans[claim].pop(0), expected_seq=seq, prev_hash=prev)
                heads[claim] = (done.last_seq, done.last_hash)
    return claims


async def project(claim_log: ClaimLog, engine: Engine) -> int:
    """Fold the whole log into the read models, as the live projector does; returns the head."""
    head = await claim_log.head()
    await Projector(claim_log, engine, build_projections(), name="projector", batch=7).run_until(head)
    return head


async def publish_raw(nats_url: str, subject: str, data: bytes) -> int:
    """Publish past the command API and services.log (as any NATS client with the admin's password could)."""
    nc = await nats.connect(nats_url)
    try:
        return (await nc.jetstream().publish(subject, data)).seq
    finally:
        await nc.close()


def forged(event: Event, prev_hash: str) -> bytes:
    """An event's bytes with a previous hash of the writer's choosing."""
    return encode(event.model_copy(update={"prev_hash": prev_hash}))


def claimlog(
    *args: str, nats_url: str, database_url: str | None = None, cwd: Path, token: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the ``claimlog`` command against this NATS server (and database), as the token's actor if given."""
    env = {**os.environ, "CLAIMLOG_NATS_URL": nats_url, "CLAIMLOG_DATA_DIR": str(cwd / ".claimlog"), "COLUMNS": "250"}
    if database_url is not None:
        env["CLAIMLOG_DATABASE_URL"] = database_url
    if token is not None:
        env["CLAIMLOG_TOKEN"] = token
    return subprocess.run(
        [sys.executable, "-m", "services.cli", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=180
    )


def verify_json(*args: str, nats_url: str, database_url: str | None = None, cwd: Path) -> tuple[int, dict]:
    """``claimlog verify --json``: its exit code and its report."""
    done = claimlog("verify", "--json", *args, nats_url=nats_url, database_url=database_url, cwd=cwd)
    assert done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout)


async def integrate(nc: nats.NATS, signer: Ed25519Signer, **options: object) -> Integrator:
    """Bring the transparency log of CLAIMS up to the head of the log, as the registry's integrator does
    (``options``: the Integrator's, ``holder`` "one" unless given); the integrator, its tree as it left it."""
    store = await TlogStore.open(nc, "CLAIMS")
    integrator = Integrator(nc, store, signer, holder=options.pop("holder", "one"), **options)
    integrator.tree = await integrator.open_tree()
    async with ClaimReader(nc, "CLAIMS") as reader:
        while await integrator.round(reader):
            pass
    return integrator
