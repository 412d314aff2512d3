"""``/log/`` served by an API process that is only a reader, from a tree its integrator built as the projector role."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine

from services.http.app import attach_log, create_app
from services.log import ClaimLog, StreamSpec, connect
from services.log.reader import ClaimReader
from services.log.tlog_store import TlogStore
from services.runtime.embedded import EmbeddedNats
from services.tlog.integrator import Integrator
from tests.builders import drafted
from tests.conftest import random_claim_id
from tlog.note import Ed25519Signer
from tlog.proof import verify_proof
from tlog.tiles import decode_bundle
from tlog.vkeys import parse_vkey

pytestmark = pytest.mark.private_nats


@pytest.fixture
def server(tmp_path: Path):
    embedded = EmbeddedNats(tmp_path / "nats", sync="always")
    embedded.start()
    yield embedded
    embedded.stop()


@pytest.fixture
async def reader_api(server: EmbeddedNats) -> AsyncIterator[httpx.AsyncClient]:
    admin = await connect(server.url_for("admin"))
    await ClaimLog(admin, StreamSpec("CLAIMS")).ensure()
    await TlogStore.open(admin, "CLAIMS")  # as `claimlog up` makes them, as admin
    claim_log = ClaimLog(admin, StreamSpec("CLAIMS"))
    for _ in range(20):
        claim = random_claim_id()
        await claim_log.append(claim, [drafted(claim)], expected_seq=0, prev_hash=None)
    projector = await connect(server.url_for("projector"))
    store = await TlogStore.open(projector, "CLAIMS", create=False)
    integrator = Integrator(projector, store, Ed25519Signer.generate("registry.test/claims"), holder="it")
    integrator.tree = await integrator.open_tree()
    async with ClaimReader(projector, "CLAIMS") as reader:
        assert await integrator.round(reader)
    reader_nc = await connect(server.url_for("reader"))
    app = create_app(create_engine("sqlite://"))
    attach_log(app, ClaimLog(reader_nc, StreamSpec("CLAIMS")))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://claimlog") as http:
        yield http
    for nc in (admin, projector, reader_nc):
        await nc.close()


async def test_a_reader_serves_checkpoint_vkey_tiles_and_proofs_that_verify(reader_api: httpx.AsyncClient):
    vkey = (await reader_api.get("/log/vkey")).text.strip()
    checkpoint = await reader_api.get("/log/checkpoint")
    assert checkpoint.status_code == 200 and checkpoint.headers["content-type"] == "text/plain; charset=utf-8"
    assert checkpoint.text.split("\n")[:2] == ["registry.test/claims", "20"]
    assert "max-age=2" in checkpoint.headers["cache-control"]
    tile = await reader_api.get("/log/tile/0/000.p/20")
    assert tile.status_code == 200 and len(tile.content) == 20 * 32
    assert tile.headers["cache-control"] == "public, max-age=31536000, immutable"
    bundle = await reader_api.get("/log/tile/entries/000.p/20")
    entries = decode_bundle(bundle.content)
    proof = await reader_api.get("/log/proof/7")
    assert proof.status_code == 200
    assert verify_proof(proof.text, entries[7], log=[parse_vkey(vkey)]).size == 20


async def test_bad_missing_and_future_requests_are_told_apart(reader_api: httpx.AsyncClient):
    bad = await reader_api.get("/log/tile/0/7")
    # Not a tile path by the document's pattern: refused as any parameter out of its form is.
    assert bad.status_code == 422 and bad.json()["error"] == "invalid_request", bad.text
    assert "path" in str(bad.json()["problems"]), bad.text
    assert (await reader_api.get("/log/tile/0/000")).status_code == 404  # no full tile yet: never an empty one
    future = await reader_api.get("/log/proof/20")
    assert future.status_code == 404 and future.json()["error"] == "not_integrated"
