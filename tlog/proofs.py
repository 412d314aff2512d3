"""RFC 6962 inclusion and consistency proofs: made from a tree's complete subtrees, checked as RFC 9162.

A tree is read through one function, ``subtree(level, index)``: the hash of the complete subtree of
``2**level`` leaves starting at leaf ``index * 2**level``. Tiles give exactly these (``tiles.TileReader``),
and so does a list of leaf hashes (``subtrees_of``), so the log, its witnesses and its auditor make
and check proofs with the same code.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tlog.errors import TlogFormatError, VerificationError
from tlog.hashes import EMPTY_ROOT, HASH_SIZE, largest_power_of_two_below, merkle_root, node_hash

Subtree = Callable[[int, int], bytes]


def subtrees_of(leaf_hashes: Sequence[bytes]) -> Subtree:
    """The ``subtree`` function of a tree held as its leaf hashes (tests, small trees)."""

    def subtree(level: int, index: int) -> bytes:
        start = index << level
        if start + (1 << level) > len(leaf_hashes):
            raise TlogFormatError(f"subtree {level}/{index} ends past the tree's {len(leaf_hashes)} leaves")
        return merkle_root(leaf_hashes[start : start + (1 << level)])

    return subtree


def range_hash(start: int, end: int, subtree: Subtree) -> bytes:
    """MTH(D[start:end]) for a range the RFC's recursion reaches: split into complete subtrees."""
    size = end - start
    if size & (size - 1) == 0 and start % size == 0:
        level = size.bit_length() - 1
        return subtree(level, start >> level)
    k = largest_power_of_two_below(size)
    return node_hash(range_hash(start, start + k, subtree), range_hash(start + k, end, subtree))


def tree_root(size: int, subtree: Subtree) -> bytes:
    """The root of the tree of ``size`` leaves."""
    return EMPTY_ROOT if size == 0 else range_hash(0, size, subtree)


def inclusion_proof(index: int, size: int, subtree: Subtree) -> list[bytes]:
    """PATH(index, D[0:size]) of RFC 6962, 2.1.1: from the leaf's sibling up to the root's child."""
    if not 0 <= index < size:
        raise TlogFormatError(f"no entry {index} in a tree of size {size}")
    proof: list[bytes] = []
    start, end = 0, size
    while end - start > 1:
        k = largest_power_of_two_below(end - start)
        if index < start + k:
            proof.append(range_hash(start + k, end, subtree))
            end = start + k
        else:
            proof.append(range_hash(start, start + k, subtree))
            start += k
    return proof[::-1]


def consistency_proof(old_size: int, new_size: int, subtree: Subtree) -> list[bytes]:
    """PROOF(old_size, D[0:new_size]) of RFC 6962, 2.1.2 (empty when either tree is empty or they are equal)."""
    if not 0 <= old_size <= new_size:
        raise TlogFormatError(f"no consistency proof from size {old_size} to size {new_size}")
    if old_size in (0, new_size):
        return []
    proof: list[bytes] = []
    m, start, end, whole = old_size, 0, new_size, True
    while m != end - start:
        k = largest_power_of_two_below(end - start)
        if m <= k:
            proof.append(range_hash(start + k, end, subtree))
            end = start + k
        else:
            proof.append(range_hash(start, start + k, subtree))
            m, start, whole = m - k, start + k, False
    if not whole:
        proof.append(range_hash(start, end, subtree))
    return proof[::-1]


def root_from_inclusion(index: int, size: int, leaf: bytes, proof: Sequence[bytes]) -> bytes:
    """The root that ``proof`` of entry ``index`` leads to (RFC 9162, 2.1.3.2), or VerificationError."""
    if not 0 <= index < size:
        raise VerificationError(f"entry {index} is outside a tree of size {size}")
    fn, sn, r = index, size - 1, leaf
    for p in _hashes(proof):
        if sn == 0:
            raise VerificationError("the inclusion proof is longer than the tree is deep")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = node_hash(r, p)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0:
        raise VerificationError("the inclusion proof is shorter than the tree is deep")
    return r


def verify_inclusion(index: int, size: int, leaf: bytes, proof: Sequence[bytes], root: bytes) -> None:
    """Raise VerificationError unless ``proof`` places ``leaf`` at ``index`` in the tree of ``root``."""
    if root_from_inclusion(index, size, leaf, proof) != root:
        raise VerificationError(f"the inclusion proof of entry {index} does not lead to the root of size {size}")


def verify_consistency(
    old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> None:
    """Raise VerificationError unless the tree of ``new_root`` extends the tree of ``old_root`` (RFC 9162, 2.1.4.2)."""
    proof = _hashes(proof)
    if not 0 <= old_size <= new_size:
        raise VerificationError(f"a tree of size {new_size} cannot extend one of size {old_size}")
    if old_size == new_size:
        if proof or old_root != new_root:
            raise VerificationError(f"two different roots for one size {old_size}")
        return
    if old_size == 0:
        if proof:
            raise VerificationError("a proof from the empty tree must be empty")
        return
    if not proof:
        raise VerificationError(f"an empty consistency proof from size {old_size} to {new_size}")
    if old_size & (old_size - 1) == 0:
        proof = [old_root, *proof]
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = proof[0]
    for c in proof[1:]:
        if sn == 0:
            raise VerificationError("the consistency proof is longer than the tree is deep")
        if fn & 1 or fn == sn:
            fr, sr = node_hash(c, fr), node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            sr = node_hash(sr, c)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0 or fr != old_root or sr != new_root:
        raise VerificationError(f"the tree of size {new_size} is not consistent with the tree of size {old_size}")


def _hashes(proof: Sequence[bytes]) -> list[bytes]:
    for i, h in enumerate(proof):
        if len(h) != HASH_SIZE:
            raise VerificationError(f"proof hash {i} is {len(h)} bytes, not {HASH_SIZE}")
    return list(proof)
