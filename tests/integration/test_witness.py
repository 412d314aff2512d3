"""The witness (C2SP tlog-witness v1.0.0 add-checkpoint) over HTTP, with its state in a real SQLite file: Ed25519 and
ML-DSA-44 cosignatures (tlog-cosignature types 0x04 and 0x06)."""

from __future__ import annotations

import asyncio
import hashlib
import stat
from pathlib import Path

import httpx
import pytest

from services.witness.keys import KEY_FILE, MLDSA44_KEY_FILE, witness_key, witness_keys, witnessed_logs
from services.witness.server import create_witness_app
from services.witness.state import WitnessState
from tlog.builder import TreeBuilder
from tlog.checkpoint import Checkpoint
from tlog.cosignature import timestamp_of
from tlog.hashes import leaf_hash
from tlog.note import Ed25519Signer, open_note, sign_note
from tlog.proofs import consistency_proof, subtrees_of
from tlog.vkeys import parse_vkey
from tlog.witness_protocol import AddCheckpoint, parse_signatures

ORIGIN = "registry.test/claims"
LOG = Ed25519Signer(ORIGIN, bytes(range(32)))


def signed(size: int, *, salt: str = "") -> str:
    builder = TreeBuilder()
    for i in range(size):
        builder.append(f"{salt}entry {i}".encode())
    return sign_note(Checkpoint(ORIGIN, size, builder.root()).text(), [LOG])


def proof(old: int, new: int, *, salt: str = "") -> tuple[bytes, ...]:
    leaves = [leaf_hash(f"{salt}entry {i}".encode()) for i in range(new)]
    return tuple(consistency_proof(old, new, subtrees_of(leaves)))


@pytest.fixture
async def witness(tmp_path: Path):
    keys = witness_keys(tmp_path, "witness.test/w1")
    state = WitnessState(tmp_path / "witness.sqlite3")
    app = create_witness_app(keys.cosigners, witnessed_logs([LOG.vkey()]), state, clock=lambda: 1_700_000_000)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://witness") as http:
        yield http, keys.ed25519, state
    state.close()


async def add(http: httpx.AsyncClient, old: int, note: str, hashes: tuple[bytes, ...] = ()) -> httpx.Response:
    return await http.post("/add-checkpoint", content=AddCheckpoint(old, hashes, note).format().encode())


async def test_a_consistent_checkpoint_is_cosigned_and_held(witness):
    http, cosigner, state = witness
    first = await add(http, 0, signed(5))
    assert first.status_code == 200
    cosignature = parse_signatures(first.text)
    _, verified = open_note(signed(5) + "".join(s.line() for s in cosignature), [cosigner.verifier()])
    assert len(verified) == 1
    assert (await add(http, 5, signed(9), proof(5, 9))).status_code == 200
    held = await http.get(f"/{hashlib.sha256(ORIGIN.encode()).hexdigest()}/checkpoint")
    assert held.status_code == 200 and held.text.split("\n")[1] == "9"
    open_note(held.text, [cosigner.verifier()])  # what it returns carries its cosignature


async def test_a_stale_old_size_is_answered_with_the_held_size(witness):
    http, _, _ = witness
    await add(http, 0, signed(5))
    stale = await add(http, 0, signed(7))
    assert stale.status_code == 409 and stale.headers["content-type"].startswith("text/x.tlog.size")
    assert stale.text == "5\n"


async def test_an_inconsistent_checkpoint_is_refused_and_both_are_kept_as_evidence(witness):
    http, _, state = witness
    await add(http, 0, signed(5))
    forked = signed(9, salt="rewritten ")
    refused = await add(http, 5, forked, proof(5, 9, salt="rewritten "))
    assert refused.status_code == 422
    [(held, submitted, reason)] = state.evidence(ORIGIN)
    assert held.split("\n")[1] == "5" and submitted == forked and "not consistent" in reason
    assert (await add(http, 5, signed(9), proof(5, 9))).status_code == 200  # the honest log goes on


@pytest.mark.parametrize(
    ("note", "status"),
    [
        (sign_note(Checkpoint("other.test/log", 1, bytes(32)).text(), [Ed25519Signer("other.test/log", bytes(32))]), 404),
        (sign_note(Checkpoint(ORIGIN, 1, bytes(32)).text(), [Ed25519Signer(ORIGIN, bytes(32))]), 403),
        ("not a checkpoint\n\n\u2014 x AAAAAAAA\n", 400),
    ],
    ids=["unknown-origin", "bad-signature", "malformed"],
)
async def test_unknown_unsigned_and_malformed_checkpoints_get_their_status(witness, note, status):
    http, _, _ = witness
    assert (await add(http, 0, note)).status_code == status


async def test_two_racing_requests_from_one_size_cosign_once(witness):
    http, _, state = witness
    await add(http, 0, signed(5))
    answers = await asyncio.gather(add(http, 5, signed(8), proof(5, 8)), add(http, 5, signed(9), proof(5, 9)))
    assert sorted(a.status_code for a in answers) == [200, 409]
    assert state.held(ORIGIN)[0].size in (8, 9)


async def test_each_checkpoint_is_answered_and_held_with_an_ed25519_and_an_ml_dsa_cosignature(witness, tmp_path: Path):
    http, _, _ = witness
    keys = witness_keys(tmp_path, None)  # the keys the witness made in its directory, read back
    vkeys = [keys.ed25519.vkey(), keys.mldsa44.vkey()]
    answer = await add(http, 0, signed(5))
    assert answer.status_code == 200
    lines = parse_signatures(answer.text)
    assert [(s.name, s.key_id) for s in lines] == [(k.name, k.key_id) for k in keys.cosigners]
    assert [timestamp_of(s) for s in lines] == [1_700_000_000, 1_700_000_000]
    for vkey, line in zip(vkeys, lines, strict=True):
        _, verified = open_note(signed(5) + line.line(), [parse_vkey(vkey)])
        assert verified == [line]
    held = await http.get(f"/{hashlib.sha256(ORIGIN.encode()).hexdigest()}/checkpoint")
    for vkey in vkeys:
        open_note(held.text, [parse_vkey(vkey)])  # the held checkpoint carries both


def test_a_witness_with_only_an_ed25519_key_gains_an_ml_dsa_key_under_its_name(tmp_path: Path):
    ed25519 = witness_key(tmp_path, "witness.test/old")
    assert not (tmp_path / MLDSA44_KEY_FILE).exists()
    keys = witness_keys(tmp_path, None)
    assert keys.ed25519.skey() == ed25519.skey() and (tmp_path / KEY_FILE).read_text() == ed25519.skey() + "\n"
    assert keys.mldsa44.name == "witness.test/old"
    assert stat.S_IMODE((tmp_path / MLDSA44_KEY_FILE).stat().st_mode) == 0o600
    assert witness_keys(tmp_path, "witness.test/old").mldsa44.vkey() == keys.mldsa44.vkey()  # made once, then kept
    (tmp_path / MLDSA44_KEY_FILE).unlink()
    (tmp_path / MLDSA44_KEY_FILE).write_text(witness_keys(tmp_path / "other", "witness.test/other").mldsa44.skey())
    with pytest.raises(ValueError, match="keys share its name"):
        witness_keys(tmp_path, None)
