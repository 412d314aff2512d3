"""The transparency log's formats (``tlog/``): trees, proofs, tiles, bundles, notes, checkpoints, cosignatures."""

from __future__ import annotations

import pytest

from tlog import TlogFormatError, VerificationError
from tlog.builder import TreeBuilder
from tlog.checkpoint import Checkpoint, parse_checkpoint
from tlog.cosignature import Cosigner, timestamp_of
from tlog.hashes import EMPTY_ROOT, leaf_hash, merkle_root
from tlog.note import Ed25519Signer, open_note, parse_note, sign_note
from tlog.proof import TlogProof, parse_proof, verify_proof
from tlog.proofs import (
    consistency_proof,
    inclusion_proof,
    subtrees_of,
    tree_root,
    verify_consistency,
    verify_inclusion,
)
from tlog.tiles import (
    Tile,
    decode_bundle,
    encode_bundle,
    index_path,
    parse_path,
    tile_reader,
    tiles_for,
)
from tlog.vkeys import parse_vkey
from tlog.witness_protocol import AddCheckpoint, parse_add_checkpoint, parse_size

SPEC_VKEY = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"
SPEC_NOTE = (
    "This is an example message.\n\n\u2014 example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1E"
    "RYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n"
)


def leaves(n: int) -> list[bytes]:
    return [leaf_hash(f"entry {i}".encode()) for i in range(n)]


def test_every_inclusion_and_consistency_proof_of_small_trees_checks():
    for size in range(1, 34):
        hashes = leaves(size)
        subtree = subtrees_of(hashes)
        root = tree_root(size, subtree)
        assert root == merkle_root(hashes)
        for index in range(size):
            verify_inclusion(index, size, hashes[index], inclusion_proof(index, size, subtree), root)
        for old in range(size + 1):
            old_root = tree_root(old, subtrees_of(hashes[:old]))
            verify_consistency(old, size, old_root, root, consistency_proof(old, size, subtree))


def test_a_proof_for_another_leaf_or_root_is_refused():
    hashes = leaves(13)
    subtree = subtrees_of(hashes)
    root = tree_root(13, subtree)
    with pytest.raises(VerificationError, match="entry 5"):
        verify_inclusion(5, 13, hashes[6], inclusion_proof(5, 13, subtree), root)
    old_root = tree_root(7, subtrees_of(hashes[:7]))
    with pytest.raises(VerificationError, match="not consistent"):
        verify_consistency(7, 13, old_root, root, consistency_proof(6, 13, subtree))
    with pytest.raises(VerificationError, match="different roots"):
        verify_consistency(13, 13, old_root, root, [])


def test_the_empty_tree_is_the_hash_of_nothing():
    assert TreeBuilder().root() == EMPTY_ROOT
    assert EMPTY_ROOT.hex() == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def test_tile_paths_follow_the_spec():
    assert index_path(1234067) == "x001/x234/067"
    assert Tile(0, 1234067, 112).path() == "tile/0/x001/x234/067.p/112"
    assert Tile(None, 5).path() == "tile/entries/005"
    assert parse_path("tile/entries/x001/x234/067.p/9") == Tile(None, 1234067, 9)
    assert parse_path("/tile/2/000") == Tile(2, 0)


@pytest.mark.parametrize(
    "bad", ["tile/0/1", "tile/0/x001", "tile/64/000", "tile/01/000", "tile/0/000.p/256", "tile/0/000.p/0", "tile/0/000/"]
)
def test_a_bad_tile_path_is_refused_with_the_form_it_wants(bad):
    with pytest.raises(TlogFormatError, match="tile"):
        parse_path(bad)


def test_the_tiles_of_a_tree_of_70000_are_those_the_spec_lists():
    tiles = list(tiles_for(70_000, entries=False))
    assert sum(1 for t in tiles if t.level == 0 and t.full) == 273
    assert [t for t in tiles if not t.full] == [Tile(0, 273, 112), Tile(1, 1, 17), Tile(2, 0, 1)]
    assert [t for t in tiles if t.level == 1 and t.full] == [Tile(1, 0)]
    assert list(tiles_for(256, entries=False)) == [Tile(0, 0), Tile(1, 0, 1)]


def test_entry_bundles_round_trip_and_refuse_what_they_cannot_hold():
    entries = [b"", b"a", b"x" * 65_535]
    assert decode_bundle(encode_bundle(entries)) == entries
    with pytest.raises(TlogFormatError, match="65536 bytes"):
        encode_bundle([b"x" * 65_536])
    with pytest.raises(TlogFormatError, match="past the bundle's end"):
        decode_bundle(b"\x00\x05abc")


def test_a_tree_resumed_from_its_partial_tiles_grows_as_one_never_stopped():
    store, grown = {}, TreeBuilder()
    for i in range(600):
        store.update(grown.append(f"e{i}".encode()))
        if i in (0, 255, 300):
            store.update(grown.partial_tiles())
            resumed = TreeBuilder.resume(grown.size, store.__getitem__)
            for j in range(i + 1, 600):
                resumed.append(f"e{j}".encode())
            twin = TreeBuilder()
            for j in range(600):
                twin.append(f"e{j}".encode())
            assert resumed.root() == twin.root()
    store.update(grown.partial_tiles())
    assert tree_root(600, tile_reader(store.__getitem__, 600)) == grown.root()


def test_the_spec_example_note_verifies_and_a_changed_one_does_not():
    note, verified = open_note(SPEC_NOTE, [parse_vkey(SPEC_VKEY)])
    assert note.text == "This is an example message.\n" and len(verified) == 1
    with pytest.raises(VerificationError, match="does not verify"):
        open_note(SPEC_NOTE.replace("example message", "exemplary message"), [parse_vkey(SPEC_VKEY)])


def test_a_note_of_unknown_keys_only_is_refused():
    other = Ed25519Signer("example.com/other", bytes(range(32)))
    with pytest.raises(VerificationError, match="no signature of a known key"):
        open_note(SPEC_NOTE, [other.verifier()])


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("no blank line\n\u2014 a AAAA\n", "blank line"),
        ("text\n\nnot a signature\n", "signature line 1"),
        ("text\n\n\u2014 a b c\n", "signature line 1"),
        ("te\x07xt\n\n\u2014 a AAAAAAAA\n", "control character"),
    ],
)
def test_a_malformed_note_says_what_is_wrong(text, why):
    with pytest.raises(TlogFormatError, match=why):
        parse_note(text)


def test_signer_keys_round_trip_and_vkeys_name_their_key():
    signer = Ed25519Signer.generate("registry.example.org/claims")
    assert Ed25519Signer.from_skey(signer.skey()).vkey() == signer.vkey()
    assert parse_vkey(signer.vkey()) == signer.verifier()
    name, key_id, _ = signer.vkey().split("+", 2)
    assert name == "registry.example.org/claims" and int(key_id, 16) == signer.key_id
    with pytest.raises(TlogFormatError, match="does not match"):
        parse_vkey(signer.vkey().replace(key_id, "00000000"))
    with pytest.raises(TlogFormatError, match="spaces or"):
        Ed25519Signer.generate("has space")


def test_checkpoints_round_trip_and_bad_lines_are_named():
    checkpoint = Checkpoint("example.com/log", 20852163, bytes(32))
    assert parse_checkpoint(checkpoint.text()) == checkpoint
    with pytest.raises(TlogFormatError, match="line 2"):
        parse_checkpoint("example.com/log\n012\nAAAA\n")
    with pytest.raises(TlogFormatError, match="line 3"):
        parse_checkpoint("example.com/log\n12\nAAAA\n")


def test_a_cosignature_carries_its_time_and_never_passes_for_the_log_key():
    seed = bytes(range(32))
    witness, log = Cosigner("witness.example/w", seed), Ed25519Signer("witness.example/w", seed)
    text = Checkpoint("example.com/log", 3, bytes(32)).text()
    signed = sign_note(text, [log]) + witness.cosign(text, 1_679_315_147).line()
    note, verified = open_note(signed, [witness.verifier()])
    assert [timestamp_of(s) for s in verified] == [1_679_315_147]
    assert note.signatures[0].key_id != witness.key_id  # type 0x01 and 0x04 ids differ for one key
    with pytest.raises(TlogFormatError, match="never 0"):
        witness.cosign(text, 0)


def test_a_tlog_proof_round_trips_and_is_verified_against_the_entry():
    log = Ed25519Signer("example.com/log", bytes(32))
    entries = [f"e{i}".encode() for i in range(10)]
    subtree = subtrees_of([leaf_hash(e) for e in entries])
    signed = sign_note(Checkpoint("example.com/log", 10, tree_root(10, subtree)).text(), [log])
    proof = TlogProof(7, tuple(inclusion_proof(7, 10, subtree)), signed, extra=b"x")
    assert parse_proof(proof.format()) == proof
    assert verify_proof(proof.format(), entries[7], log=[log.verifier()]).size == 10
    with pytest.raises(VerificationError):
        verify_proof(proof.format(), entries[6], log=[log.verifier()])
    with pytest.raises(VerificationError, match="0 valid cosignatures, 1 required"):
        verify_proof(proof.format(), entries[7], log=[log.verifier()], witnesses=[], quorum=1)


def test_add_checkpoint_bodies_round_trip_and_bad_ones_are_named():
    request = AddCheckpoint(5, (bytes(32), bytes(range(32))), "example.com/log\n7\nAAAA\n\n")
    assert parse_add_checkpoint(request.format().encode()) == request
    with pytest.raises(TlogFormatError, match="'old <size>'"):
        parse_add_checkpoint(b"old 05\n\ncheckpoint")
    with pytest.raises(TlogFormatError, match="proof line 1"):
        parse_add_checkpoint(b"old 5\nAAAA\n\ncheckpoint")
    assert parse_size("12\n") == 12


@pytest.mark.parametrize("size", [1, 2, 7, 255, 256, 257, 600, 65_537])
def test_a_tiles_kept_levels_give_every_subtree_the_tiles_give(size: int):
    """What an API process keeps to prove without hashing again equals what the tiles give, subtree for subtree."""
    from tlog.tiles import levels_reader, tile_levels, tile_reader

    builder, tiles = TreeBuilder(), {}
    for n in range(size):
        tiles.update(builder.append(n.to_bytes(4, "big")))
    tiles.update(builder.partial_tiles())
    levels = {tile: tile_levels(data) for tile, data in tiles.items() if tile.level is not None}
    by_tiles, by_levels = tile_reader(tiles.__getitem__, size), levels_reader(levels.__getitem__, size)
    for level in range(size.bit_length()):
        indexes = range(size >> level)
        for index in (indexes if len(indexes) < 600 else [*indexes[:300], *indexes[-300:]]):
            assert by_levels(level, index) == by_tiles(level, index), (level, index)
