"""The registry's checkpoints cosigned by a real `claimlog witness` process (with its Ed25519 or its ML-DSA-44 key); a
lost tree is not silently restarted."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from services.auditor.errors import AuditFailure
from services.auditor.run import run_audit
from services.log import ClaimLog
from services.log.names import tlog_bucket
from services.log.reader import ClaimReader
from services.log.tlog_store import TlogStore
from services.tlog.integrator import Integrator, Refused
from services.tlog.published import PublishedLog
from services.tlog.witnesses import Witnesses, parse_witnesses
from services.witness.keys import MLDSA44_KEY_FILE, witness_key
from tests.builders import drafted
from tests.conftest import random_claim_id
from tests.e2e.test_up import free_port
from tests.integration.test_auditor import client
from tlog.cosignature import Cosigner, MLDSA44CosignatureVerifier, MLDSA44Cosigner
from tlog.note import Ed25519Signer, open_note, parse_note
from tlog.vkeys import parse_vkey

ORIGIN = "registry.test/witnessed"
LOG = Ed25519Signer(ORIGIN, bytes(range(32)))


@contextmanager
def running_witness(directory: Path, *options: str) -> Iterator[tuple[str, list[str]]]:
    """A `claimlog witness` of LOG in ``directory`` on a free port: its URL and the verifier keys it prints (Ed25519, ML-DSA-44)."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "services.cli", "witness", "--dir", str(directory), *options, "--log", LOG.vkey(), "--port", str(port)],
        stderr=subprocess.PIPE, text=True, env=os.environ,
    )
    try:
        printed: list[str] = []  # read aside, so a witness that prints less fails the test rather than hangs it
        reader = threading.Thread(target=lambda: printed.extend(process.stderr.readline() for _ in range(2)), daemon=True)
        reader.start()
        reader.join(20)
        assert len(printed) == 2 and all(line.startswith("witness ") for line in printed), f"the witness printed {printed}"
        vkeys = [line.split()[1] for line in printed]
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                httpx.get(f"{url}/none/checkpoint")
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        yield url, vkeys
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
def witness(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A `claimlog witness` of LOG on a free port: its URL and its Ed25519 verifier key."""
    with running_witness(tmp_path / "w", "--name", "witness.test/w1") as (url, vkeys):
        yield url, vkeys[0]


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
    mldsa44 = MLDSA44Cosigner("witness.test/w2", bytes(32))
    assert parse_witnesses(f"http://a {mldsa44.vkey()}")[0].verifier == mldsa44.verifier()
    with pytest.raises(ValueError, match="not a witness's cosignature key"):
        parse_witnesses(f"http://a {LOG.vkey()}")


async def test_a_registry_keeping_the_ml_dsa_cosignature_serves_it_and_an_audit_requiring_it_passes(claim_log: ClaimLog,
                                                                                                      tmp_path: Path):
    with running_witness(tmp_path / "w", "--name", "witness.test/w1") as (url, (ed25519_vkey, mldsa44_vkey)):
        assert isinstance(parse_vkey(mldsa44_vkey), MLDSA44CosignatureVerifier)
        witnesses = Witnesses(parse_witnesses(f"{url} {mldsa44_vkey}"), await TlogStore.open(claim_log.nc, "CLAIMS"))
        try:
            await draft(claim_log, 6)
            await integrated(claim_log, witnesses)
        finally:
            await witnesses.close()
    fetch = client(claim_log)
    try:
        note = (await fetch("checkpoint")).decode()
        of_witness = [s.key_id for s in parse_note(note).signatures if s.name == "witness.test/w1"]
        assert of_witness == [parse_vkey(mldsa44_vkey).key_id]  # the ML-DSA-44 line only: the one configured
        report = await run_audit("http://registry", tmp_path / "audit", key=LOG.vkey(), witnesses=[mldsa44_vkey],
                                 per_second=10_000, progress=lambda *_: None, say=lambda _: None, client=fetch)
        assert report.checkpoint.size == 6
        with pytest.raises(AuditFailure, match="no valid cosignature of witness witness.test/w1"):
            await run_audit("http://registry", tmp_path / "audit2", key=LOG.vkey(), witnesses=[ed25519_vkey],
                            per_second=10_000, progress=lambda *_: None, say=lambda _: None, client=fetch)
    finally:
        await fetch.close()


def test_a_witness_directory_with_only_an_ed25519_key_gains_an_ml_dsa_key_at_start(tmp_path: Path):
    old = witness_key(tmp_path / "w", "witness.test/old")  # a witness made before it had an ML-DSA-44 key
    with running_witness(tmp_path / "w") as (_, (ed25519_vkey, mldsa44_vkey)):  # no --name: the key's name is kept
        assert ed25519_vkey == old.vkey()
        made = MLDSA44Cosigner.from_skey((tmp_path / "w" / MLDSA44_KEY_FILE).read_text())
        assert made.vkey() == mldsa44_vkey and made.name == "witness.test/old"
