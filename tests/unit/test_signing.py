"""Signatures of appends: one Ed25519 signature over a Merkle root, each event checked on its own."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import pytest

from events.subjects import DEFAULT_LAYOUT
from services.log.signing import (
    PROOF,
    SIGNATURE,
    SIGNER,
    Attribution,
    Signed,
    Signer,
    SigningKey,
    Unsigned,
    merkle,
    root_from,
)

T0 = datetime(2026, 12, 1, tzinfo=UTC)


def _key(signer: Signer, actor_id: str, *, delegate: bool = False, retired_at: datetime | None = None) -> SigningKey:
    return SigningKey(signer.key_id, actor_id, signer.public_key, delegate, T0, retired_at)


@pytest.mark.parametrize("count", [1, 2, 3, 5, 8, 13, 1000])
def test_every_event_of_a_set_leads_to_the_root_and_no_other_position_does(count):
    hashes = [hashlib.sha256(str(i).encode()).digest() for i in range(count)]
    root, paths = merkle(hashes)
    for index, (event_hash, path) in enumerate(zip(hashes, paths, strict=True)):
        assert root_from(event_hash, index, count, path) == root
        assert len(path) <= count.bit_length()
    if count > 1:
        assert root_from(hashes[0], 1, count, paths[1]) != root  # another event in its place
        with pytest.raises(ValueError, match="proof"):
            root_from(hashes[0], 0, count, paths[0] + [b"\0" * 32])


def test_a_batch_shares_one_signature_and_each_event_verifies_alone():
    signer = Signer.generate()
    datas = [f"event {i}".encode() for i in range(7)]
    headers = signer.headers(datas)
    assert len({h[SIGNATURE] for h in headers}) == 1
    checked = Signed({signer.key_id: _key(signer, "api", delegate=True)})
    for data, header in zip(reversed(datas), reversed(headers), strict=True):
        assert checked.signer_of(header, data, T0).actor_id == "api"


def test_changed_bytes_a_swapped_proof_and_an_unknown_key_are_refused_with_the_reason():
    signer, stranger = Signer.generate(), Signer.generate()
    datas = [b"first", b"second"]
    headers = signer.headers(datas)
    checked = Signed({signer.key_id: _key(signer, "api")})
    with pytest.raises(ValueError, match="does not verify"):
        checked.signer_of(headers[0], b"first, altered", T0)
    with pytest.raises(ValueError, match="does not verify"):
        checked.signer_of(headers[1], datas[0], T0)  # the other event's proof
    with pytest.raises(ValueError, match="does not hold"):
        checked.signer_of(stranger.headers([b"x"])[0], b"x", T0)
    with pytest.raises(ValueError, match="incomplete"):
        checked.signer_of({SIGNER: signer.key_id}, b"x", T0)
    with pytest.raises(ValueError, match="malformed"):
        checked.signer_of({**headers[0], PROOF: "0/x"}, datas[0], T0)
    assert checked.signer_of(None, b"x", T0) is None


def test_a_retired_key_verifies_what_was_stored_before_its_retirement_only():
    signer = Signer.generate()
    header = signer.headers([b"e"])[0]
    checked = Signed({signer.key_id: _key(signer, "api", retired_at=T0 + timedelta(days=1))})
    assert checked.signer_of(header, b"e", T0).key_id == signer.key_id
    with pytest.raises(ValueError, match="retired"):
        checked.signer_of(header, b"e", T0 + timedelta(days=2))


def test_who_may_sign_for_whom():
    api, bot = Signer.generate(), Signer.generate()
    rules = Attribution({api.key_id: _key(api, "claimlog-api", delegate=True), bot.key_id: _key(bot, "source-bot")}, required_after=10)
    by_api, by_bot = api.headers([b"e"])[0], bot.headers([b"e"])[0]
    assert rules.check(11, by_api, b"e", T0, "ada").actor_id == "claimlog-api"  # the API for an actor it authenticated
    assert rules.check(11, by_bot, b"e", T0, "source-bot").actor_id == "source-bot"  # a producer for itself
    with pytest.raises(ValueError, match="only for itself"):
        rules.check(11, by_bot, b"e", T0, "ada")
    with pytest.raises(ValueError, match="direct producer"):
        rules.check(11, by_api, b"e", T0, "source-bot")
    assert rules.check(10, None, b"e", T0, "ada") is None  # stored before signatures were required
    with pytest.raises(Unsigned, match="after sequence 10"):
        rules.check(11, None, b"e", T0, "ada")
    assert Attribution({}, None).check(99, None, b"e", T0, "ada") is None  # nothing required yet


def test_a_signing_key_file_round_trips_and_a_wrong_file_says_why(tmp_path):
    signer = Signer.generate()
    (tmp_path / "k.pem").write_bytes(signer.pem())
    assert Signer.from_file(tmp_path / "k.pem").key_id == signer.key_id
    (tmp_path / "bad.pem").write_text("not a key")
    with pytest.raises(ValueError, match="bad.pem: not an unencrypted PEM private key"):
        Signer.from_file(tmp_path / "bad.pem")
    with pytest.raises(ValueError, match="no such file"):
        Signer.from_file(tmp_path / "missing.pem")


def test_a_batch_written_as_header_blocks_carries_each_events_signature():
    from services.log.batches import ClaimShare, _blocks
    from services.log.chain import chain
    from services.log.connection import RawHeaders
    from tests.builders import attached, drafted

    signer = Signer.generate()
    shares = [ClaimShare(claim, 0, chain([drafted(claim), attached(claim)], None)) for claim in ("CLM-0001", "CLM-0002")]
    signed = signer.headers([data for share in shares for _, data in share.linked])
    checked = Signed({signer.key_id: _key(signer, "api", delegate=True)})
    blocks = list(_blocks(shares, "b1", "reply", DEFAULT_LAYOUT, signed))
    assert len(blocks) == 4
    for _, _, block, data in blocks:
        assert checked.signer_of(RawHeaders(block), data, T0).key_id == signer.key_id
    assert all(SIGNER not in block.decode() for _, _, block, _ in _blocks(shares, "b1", "reply", DEFAULT_LAYOUT))
