"""The fixed inputs both sides derive the vectors from (``main.go`` holds the same)."""

from __future__ import annotations

import hashlib
from functools import cache

from tlog.cosignature import Cosigner
from tlog.hashes import leaf_hash
from tlog.note import Ed25519Signer

LOG_NAME = "example.com/claimlog-interop"
WITNESS_NAME = "witness.example/interop"
TIMESTAMP = 1_700_000_000
MAX_SIZE = 65_537
SIZES = (0, 257, 65_537)  # the checkpoints claimlog signs for Go to open
INCLUSIONS = ((0, 1), (0, 2), (1, 3), (4, 8), (255, 257), (256, 257), (70, 1000), (999, 1000), (65_536, 65_537))
CONSISTENCIES = ((1, 2), (1, 3), (2, 3), (3, 8), (4, 8), (255, 256), (256, 257), (257, 1000), (1000, 65_537))


def entry(i: int) -> bytes:
    return f"claimlog interop entry {i}\n".encode() * (1 + i % 3)


def seed(label: str) -> bytes:
    return hashlib.sha256(label.encode()).digest()


@cache
def leaf_hashes() -> tuple[bytes, ...]:
    return tuple(leaf_hash(entry(i)) for i in range(MAX_SIZE))


def log_signer() -> Ed25519Signer:
    return Ed25519Signer(LOG_NAME, seed("claimlog interop log key"))


def cosigner() -> Cosigner:
    return Cosigner(WITNESS_NAME, seed("claimlog interop witness key"))
