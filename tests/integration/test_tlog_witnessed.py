"""The registry's checkpoints cosigned by a real `claimlog witness` process; a lost tree is not silently restarted."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from services.log import ClaimLog
from services.log.names import tlog_bucket
from services.log.reader import ClaimReader
from services.log.tlog_store import TlogStore
from services.tlog.integrator import Integrator, Refused
from services.tlog.published import PublishedLog
from services.tlog.witnesses import Witnesses, parse_witnesses
from tests.builders import drafted
from tests.conftest import random_claim_id
from tests.e2e.test_up import free_port
from tlog.cosignature import Cosigner
from tlog.note import Ed25519Signer, open_note
from tlog.vkeys import parse_vkey

ORIGIN = "registry.test/witnessed"
LOG = Ed25519Signer(ORIGIN, bytes(range(32)))


@pytest.fixture
def witness(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A `claimlog witness` of LOG on a free port: its URL and its verifier key."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "services.cli", "witness", "--dir", str(tmp_path / "w"), "--name", "witness.test/w1",
         "--log", LOG.vkey(), "--port", str(port)],
        stderr=subprocess.PIPE, text=True, env=os.environ,
    )
    vkey = process.stderr.readline().split()[1]
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{url}/none/checkpoint")
            break
        except httpx.HTTPError:
            time.sleep(0.1)
    yield url, vkey
    process.terminate()
    process.wait(timeout=10)


async def integrated(claim_log: ClaimLog, witnesses: Witnesses) -> Integrator:
    store = await TlogStore.open(claim_log.nc, "CLAIMS")
    integrator = Integrator(claim_log.nc, store, LOG, holder="one", witnesses=witnesses)
    integrator.tree = await integrator.open_tree()
    async with ClaimReader(claim_log.nc, "CLAIMS") as reader:
        while await integrator.round(reader):
            pass
    if integrator._pushing is not None:
        await integrator._pushing
    return integrator


async def draft(claim_log: ClaimLog, count: int) -> None:
    for _ in range(count):
        claim = random_claim_id()
        await claim_log.append(claim, [drafted(claim)], expected_seq=0, prev_hash=None)


async def test_each_checkpoint_is_served_with_the_witness_cosignature(claim_log: ClaimLog, witness):
    url, vkey = witness
    witnesses = Witnesses(parse_witnesses(f"{url} {vkey}"), await TlogStore.open(claim_log.nc, "CLAIMS"))
    try:
        await draft(claim_log, 10)
        await integrated(claim_log, witnesses)
        await draft(claim_log, 5)
        await integrated(claim_log, witnesses)  # the second push carries a consistency proof from 10
    finally:
        await witnesses.close()
    note, checkpoint = await PublishedLog(claim_log.nc, "CLAIMS").signed()
    assert checkpoint.size == 15
    _, verified = open_note(note, [parse_vkey(vkey)])
    assert len(verified) == 1
    assert httpx.get(f"{url}/{hashlib.sha256(ORIGIN.encode()).hexdigest()}/checkpoint").text.split("\n")[1] == "15"


async def test_a_lost_tree_is_refused_when_a_witness_holds_the_log(claim_log: ClaimLog, witness):
    url, vkey = witness
    store = await TlogStore.open(claim_log.nc, "CLAIMS")
    witnesses = Witnesses(parse_witnesses(f"{url} {vkey}"), store)
    try:
        await draft(claim_log, 4)
        await integrated(claim_log, witnesses)
        await claim_log.nc.jetstream().delete_key_value(tlog_bucket("CLAIMS"))  # the tree's record and checkpoint lost
        with pytest.raises(Refused, match="witnesses cosigned one"):
            await integrated(claim_log, Witnesses(parse_witnesses(f"{url} {vkey}"), await TlogStore.open(claim_log.nc, "CLAIMS")))
    finally:
        await witnesses.close()


def test_witness_settings_name_the_pair_that_is_wrong():
    cosigner = Cosigner("witness.test/w2", bytes(32))
    assert parse_witnesses(f"http://a {cosigner.vkey()}")[0].verifier == cosigner.verifier()
    with pytest.raises(ValueError, match="pair 2"):
        parse_witnesses(f"http://a {cosigner.vkey()}, nonsense")
    with pytest.raises(ValueError, match="not a cosignature/v1 key"):
        parse_witnesses(f"http://a {LOG.vkey()}")
