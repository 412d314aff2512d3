"""claimlog's ``tlog/`` agrees with golang.org/x/mod/sumdb, an implementation not written here.

``tests/interop/go_vectors.json`` was made by ``tests/interop/main.go`` from the fixed inputs of
``tests/interop/fixed.py`` (``make vectors``, which also has Go verify what claimlog makes), so this
test needs no Go: roots, hash tiles (x/mod's ``tile/8/<L>/...`` mapped onto ``tile/<L>/...``), signed
checkpoints, verifier keys, cosignatures, inclusion and consistency proofs and a tlog-proof.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.interop import fixed
from tests.interop.make_claimlog_vectors import vectors
from tlog.builder import TreeBuilder
from tlog.checkpoint import parse_checkpoint
from tlog.hashes import leaf_hash
from tlog.note import open_note, unb64
from tlog.proof import verify_proof
from tlog.proofs import (
    consistency_proof,
    inclusion_proof,
    subtrees_of,
    tree_root,
    verify_consistency,
    verify_inclusion,
)
from tlog.tiles import parse_path, tiles_for
from tlog.vkeys import parse_vkey

GO = json.loads((Path(__file__).parents[1] / "interop" / "go_vectors.json").read_text())


@pytest.fixture(scope="module")
def claimlog_tiles() -> dict[str, bytes]:
    """Every tile claimlog's builder writes on its way to the largest tree, every partial width Go lists included."""
    wanted = {parse_path(p) for tree in GO["trees"] for p in tree["tiles"]}
    sizes = {t.index * 256 ** (t.level + 1) + t.width * 256**t.level for t in wanted if not t.full}
    builder, found = TreeBuilder(), {}
    for i in range(fixed.MAX_SIZE):
        found.update((t.path(), data) for t, data in builder.append(fixed.entry(i)))
        if builder.size in sizes:
            found.update((t.path(), data) for t, data in builder.partial_tiles())
    return found


def test_the_vectors_come_from_go_and_cover_large_trees():
    assert "golang.org/x/mod" in GO["implementation"]
    assert max(tree["size"] for tree in GO["trees"]) == fixed.MAX_SIZE


@pytest.mark.parametrize("tree", GO["trees"], ids=lambda t: f"size{t['size']}")
def test_roots_and_hash_tiles_equal_go(tree, claimlog_tiles):
    builder = TreeBuilder()
    for i in range(tree["size"]):
        builder.append(fixed.entry(i))
    assert builder.root() == unb64(tree["root"], what="root")
    for path, digest in tree["tiles"].items():
        assert hashlib.sha256(claimlog_tiles[path]).hexdigest() == digest, path
    assert {t.path() for t in tiles_for(tree["size"], entries=False)} <= set(tree["tiles"])


def test_checkpoints_are_byte_for_byte_those_go_signs():
    ours = vectors()
    assert ours["log_vkey"] == GO["log_vkey"] and ours["witness_vkey"] == GO["witness_vkey"]
    assert [c["note"] for c in ours["checkpoints"]] == [c["note"] for c in GO["checkpoints"]]


@pytest.mark.parametrize("signed", GO["checkpoints"], ids=lambda c: f"size{c['size']}")
def test_go_signed_checkpoints_open_with_the_parsed_vkeys(signed):
    note, verified = open_note(signed["note"], [parse_vkey(GO["log_vkey"]), parse_vkey(GO["witness_vkey"])])
    assert len(verified) == 2
    assert parse_checkpoint(note.text).size == signed["size"]


def test_inclusion_and_consistency_proofs_equal_go():
    subtree = subtrees_of(fixed.leaf_hashes())
    roots = {t["size"]: unb64(t["root"], what="root") for t in GO["trees"]}
    for size in {c[k] for c in GO["consistency"] for k in ("old", "new")} - set(roots):
        roots[size] = tree_root(size, subtree)
    for case in GO["inclusion"]:
        proof = [unb64(h, what="hash") for h in case["proof"]]
        assert inclusion_proof(case["index"], case["size"], subtree) == proof
        verify_inclusion(case["index"], case["size"], fixed.leaf_hashes()[case["index"]], proof, roots[case["size"]])
    for case in GO["consistency"]:
        proof = [unb64(h, what="hash") for h in case["proof"]]
        assert consistency_proof(case["old"], case["new"], subtree) == proof
        verify_consistency(case["old"], case["new"], roots[case["old"]], roots[case["new"]], proof)


def test_a_tlog_proof_written_from_go_outputs_verifies():
    case = next(c for c in GO["inclusion"] if "tlog_proof" in c)
    checkpoint = verify_proof(
        case["tlog_proof"],
        fixed.entry(case["index"]),
        log=[parse_vkey(GO["log_vkey"])],
        witnesses=[parse_vkey(GO["witness_vkey"])],
        quorum=1,
    )
    assert checkpoint.size == case["size"]
    assert leaf_hash(fixed.entry(case["index"])) == fixed.leaf_hashes()[case["index"]]
