"""`claimlog audit`'s check over HTTP of a registry's transparency log: continues, detects forks, bad tiles, split views."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine

from services.auditor.audit import audit
from services.auditor.client import LogClient
from services.auditor.errors import AuditFailure
from services.auditor.mirror import Mirror
from services.auditor.run import run_audit
from services.http.app import attach_log, create_app
from services.log import ClaimLog
from services.log.names import tiles_bucket, tlog_bucket
from services.log.reader import ClaimReader
from tests.builders import drafted
from tests.conftest import random_claim_id
from tests.integration.audit_log import integrate
from tests.integration.test_tlog_integrator import _recreate
from tlog.cosignature import Cosigner
from tlog.note import Ed25519Signer

LOG = Ed25519Signer("registry.test/audited", bytes(range(32)))


async def grow(claim_log: ClaimLog, count: int) -> None:
    for _ in range(count):
        claim = random_claim_id()
        await claim_log.append(claim, [drafted(claim)], expected_seq=0, prev_hash=None)
    await integrate(claim_log.nc, LOG)


def client(claim_log: ClaimLog) -> LogClient:
    app = create_app(create_engine("sqlite://"))
    attach_log(app, claim_log)
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://registry")
    return LogClient("http://registry", per_second=10_000, http=http)


async def test_an_audit_pins_the_key_and_continues_where_it_stopped(claim_log: ClaimLog, tmp_path: Path):
    await grow(claim_log, 300)
    mirror, said = Mirror(tmp_path), []
    fetch = client(claim_log)
    first = await audited(fetch, tmp_path, said)
    assert (first.checkpoint.size, first.entries_checked) == (300, 300) and "pinned" in said[0]
    assert mirror.vkey() == LOG.vkey()
    await grow(claim_log, 20)
    fetch = client(claim_log)  # an API process caches its checkpoint for a second: ask one that has not read it
    second = await audited(fetch, tmp_path, said)
    assert (second.previous, second.checkpoint.size, second.entries_checked) == (300, 320, 20)
    with pytest.raises(AuditFailure, match="not the one pinned"):
        await audited(fetch, tmp_path, said, key=Ed25519Signer("registry.test/audited", bytes(32)).vkey())


async def audited(fetch: LogClient, directory: Path, said: list[str], *, key: str | None = None):
    return await run_audit("http://registry", directory, key=key, witnesses=(), per_second=1, progress=lambda *_: None,
                           say=said.append, client=fetch)


async def test_a_rewritten_log_signed_with_the_same_key_is_reported_as_a_fork(claim_log: ClaimLog, tmp_path: Path):
    await grow(claim_log, 30)
    fetch, mirror = client(claim_log), Mirror(tmp_path)
    mirror.pin(LOG.vkey())
    await audit(fetch, mirror, LOG.verifier())
    js = claim_log.nc.jetstream()  # the operator rewrites one event and makes the tree again, with the same key
    async with ClaimReader(claim_log.nc, "CLAIMS") as reader:
        kept = await reader.read_log(after_seq=0, limit=30)
    await _recreate(claim_log.nc, (await js.stream_info("CLAIMS")).config, kept, change=3)
    await js.delete_key_value(tlog_bucket("CLAIMS"))
    await js.delete_object_store(tiles_bucket("CLAIMS"))
    await grow(claim_log, 5)
    with pytest.raises(AuditFailure, match=r"a fork\); both checkpoints are in") as failure:
        await audit(client(claim_log), mirror, LOG.verifier())
    evidence = Path(str(failure.value).rsplit(" ", 1)[-1]).read_text()
    assert "\n30\n" in evidence and "\n35\n" in evidence


async def test_a_served_tile_that_does_not_match_its_entries_fails_the_audit(claim_log: ClaimLog, tmp_path: Path):
    await grow(claim_log, 260)
    served = client(claim_log)

    async def tampered(path: str) -> bytes:
        data = await served(path)
        return data[:-1] + bytes([data[-1] ^ 1]) if path == "tile/0/000" else data

    with pytest.raises(AuditFailure, match="tile/0/000 does not match"):
        await audit(tampered, Mirror(tmp_path), LOG.verifier())


async def test_a_checkpoint_without_the_required_cosignature_fails_the_audit(claim_log: ClaimLog, tmp_path: Path):
    await grow(claim_log, 3)
    witness = Cosigner("witness.test/w1", bytes(32))
    with pytest.raises(AuditFailure, match="no valid cosignature of witness witness.test/w1"):
        await audit(client(claim_log), Mirror(tmp_path), LOG.verifier(), [witness.verifier()])
