"""RFC 6962 Merkle tree hashing: SHA-256, leaf prefix 0x00, node prefix 0x01."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

HASH_SIZE = 32
EMPTY_ROOT = hashlib.sha256(b"").digest()  # the root of a tree of size 0 (RFC 6962, 2.1)


def leaf_hash(entry: bytes) -> bytes:
    """The hash of one entry: SHA-256(0x00 || entry)."""
    return hashlib.sha256(b"\x00" + entry).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """The hash of an inner node: SHA-256(0x01 || left || right)."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def largest_power_of_two_below(n: int) -> int:
    """The largest power of two strictly less than ``n`` (``n`` > 1), the split of RFC 6962, 2.1."""
    return 1 << ((n - 1).bit_length() - 1)


def merkle_root(hashes: Sequence[bytes]) -> bytes:
    """MTH over already hashed leaves (or over subtree hashes of equal, power-of-two size)."""
    if not hashes:
        return EMPTY_ROOT
    level = list(hashes)
    if len(level) & (len(level) - 1) == 0:
        while len(level) > 1:
            level = [node_hash(level[i], level[i + 1]) for i in range(0, len(level), 2)]
        return level[0]
    k = largest_power_of_two_below(len(level))
    return node_hash(merkle_root(level[:k]), merkle_root(level[k:]))
