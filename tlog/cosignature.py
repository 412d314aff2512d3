"""C2SP tlog-cosignature: a witness's timestamped cosignature over a checkpoint, of two types.

- Ed25519, type 0x04 (v1.0.1): the signed message is ``cosignature/v1\\ntime <timestamp>\\n`` followed by the
  checkpoint's note text, extension lines included; the line carries the 8-byte big-endian timestamp,
  then the 64-byte signature.
- ML-DSA-44, type 0x06 (tlog-cosignature.md as of C2SP commit 01194db11950a0ae2b2b2401afa0a4063a822458):
  the signed message is the ``cosigned_message`` struct ``"subtree/v1\\n\\0" || u8 len || cosigner name ||
  u64 timestamp || u8 len || origin || u64 start (0) || u64 end (the size) || root``, so it names the
  cosigner and not the extension lines; the line carries the timestamp, then the 2420-byte FIPS 204
  signature (pure ML-DSA, empty context). The private key is kept as its 32-byte seed.

Each type's key id names its type, so a cosigner's key never verifies as a log's key or as the other type.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.mldsa import MLDSA44PrivateKey, MLDSA44PublicKey

from tlog.checkpoint import parse_checkpoint
from tlog.errors import TlogFormatError
from tlog.note import (
    COSIGNATURE_MLDSA44,
    COSIGNATURE_V1,
    SEED_SIZE,
    Ed25519Signer,
    Signature,
    check_name,
    checked_id,
    key_id,
    read_skey,
    skey_text,
    vkey_text,
)

ED25519_SIGNATURE_SIZE = 64
MLDSA44_PUBLIC_SIZE = 1312
MLDSA44_SIGNATURE_SIZE = 2420
SUBTREE_LABEL = b"subtree/v1\n\x00"


def message(text: str | bytes, timestamp: int) -> bytes:
    """The bytes an Ed25519 cosigner signs for the checkpoint ``text`` at ``timestamp`` (POSIX seconds)."""
    check_timestamp(timestamp)
    body = text.encode() if isinstance(text, str) else text
    return b"cosignature/v1\ntime %d\n" % timestamp + body


def cosigned_message(name: str, timestamp: int, text: str | bytes) -> bytes:
    """The bytes an ML-DSA-44 cosigner ``name`` signs for the checkpoint ``text`` at ``timestamp``: the spec's
    ``cosigned_message`` with start 0 and end the tree's size; TlogFormatError when it cannot be built."""
    check_timestamp(timestamp)
    try:
        checkpoint = parse_checkpoint(text.decode() if isinstance(text, bytes) else text)
    except UnicodeDecodeError as error:
        raise TlogFormatError(f"a checkpoint must be UTF-8: {error}") from None
    return (SUBTREE_LABEL + opaque8(name, what="the cosigner name") + struct.pack(">Q", timestamp)
            + opaque8(checkpoint.origin, what="the log's origin") + struct.pack(">QQ", 0, checkpoint.size) + checkpoint.root)


def opaque8(text: str, *, what: str) -> bytes:
    """``opaque <1..2^8-1>`` (a cosigner name, an origin): one length byte, then the UTF-8 bytes."""
    raw = text.encode()
    if not 1 <= len(raw) <= 255:
        raise TlogFormatError(f"{what} {text[:60]!r} is {len(raw)} bytes: an ML-DSA-44 cosignature names 1 to 255")
    return bytes([len(raw)]) + raw


def check_timestamp(timestamp: int) -> None:
    """A cosignature's timestamp is a u64 no larger than 2^63 - 1 (both types); TlogFormatError otherwise."""
    if not 0 <= timestamp < 1 << 63:
        raise TlogFormatError(f"a cosignature's timestamp {timestamp} is outside 0..2**63-1")


def timestamp_of(signature: Signature) -> int:
    """The time a cosignature (Ed25519 or ML-DSA-44) was made, from its first eight bytes."""
    sizes = (8 + ED25519_SIGNATURE_SIZE, 8 + MLDSA44_SIGNATURE_SIZE)
    if len(signature.signature) not in sizes:
        raise TlogFormatError(f"a cosignature is {sizes[0]} (Ed25519) or {sizes[1]} (ML-DSA-44) bytes after the key id, "
                              f"not {len(signature.signature)}")
    return int.from_bytes(signature.signature[:8], "big")


@dataclass(frozen=True)
class CosignatureVerifier:
    """Checks type 0x04 cosignatures of one witness."""

    name: str
    public: bytes

    @property
    def key_id(self) -> int:
        return key_id(self.name, COSIGNATURE_V1, self.public)

    def verify(self, text: bytes, signature: bytes) -> bool:
        if len(signature) != 8 + ED25519_SIGNATURE_SIZE:
            return False
        timestamp = int.from_bytes(signature[:8], "big")
        if timestamp >= 1 << 63:
            return False
        try:
            Ed25519PublicKey.from_public_bytes(self.public).verify(signature[8:], message(text, timestamp))
            return True
        except (InvalidSignature, ValueError):
            return False

    def vkey(self) -> str:
        return vkey_text(self.name, COSIGNATURE_V1, self.public)


class Cosigner:
    """A witness's Ed25519 signing key: cosignatures of checkpoints at a given time."""

    def __init__(self, name: str, seed: bytes) -> None:
        self._signer = Ed25519Signer(name, seed)  # checks the name and the seed
        self.name, self.seed, self.public = name, seed, self._signer.public
        self.key_id = key_id(name, COSIGNATURE_V1, self.public)
        self._key = Ed25519PrivateKey.from_private_bytes(seed)

    @classmethod
    def from_skey(cls, skey: str) -> Cosigner:
        """A cosigner from ``PRIVATE+KEY+<name>+<hex key id>+base64(0x04 || seed)`` (the note signer-key form)."""
        name, seed, hex_id = read_skey(skey, COSIGNATURE_V1, what="cosigner")
        return checked_id(cls(name, seed), hex_id, what="cosigner")

    def skey(self) -> str:
        return skey_text(self.name, self.key_id, COSIGNATURE_V1, self.seed)

    def verifier(self) -> CosignatureVerifier:
        return CosignatureVerifier(self.name, self.public)

    def vkey(self) -> str:
        return self.verifier().vkey()

    def cosign(self, text: str, timestamp: int) -> Signature:
        """The cosignature of checkpoint ``text`` at ``timestamp`` (never 0: the witness protocol forbids it)."""
        if timestamp <= 0:
            raise TlogFormatError("a witness's cosignature carries the time it was made, never 0")
        signed = self._key.sign(message(text, timestamp))
        return Signature(self.name, self.key_id, timestamp.to_bytes(8, "big") + signed)


@dataclass(frozen=True)
class MLDSA44CosignatureVerifier:
    """Checks type 0x06 cosignatures of one witness: ML-DSA-44 over the ``cosigned_message`` naming it."""

    name: str
    public: bytes

    @property
    def key_id(self) -> int:
        return key_id(self.name, COSIGNATURE_MLDSA44, self.public)

    def verify(self, text: bytes, signature: bytes) -> bool:
        if len(signature) != 8 + MLDSA44_SIGNATURE_SIZE:
            return False
        try:
            signed = cosigned_message(self.name, int.from_bytes(signature[:8], "big"), text)
            MLDSA44PublicKey.from_public_bytes(self.public).verify(signature[8:], signed)
            return True
        except (InvalidSignature, TlogFormatError, ValueError):
            return False

    def vkey(self) -> str:
        return vkey_text(self.name, COSIGNATURE_MLDSA44, self.public)


class MLDSA44Cosigner:
    """A witness's ML-DSA-44 signing key, kept as its FIPS 204 seed: cosignatures of checkpoints at a given time."""

    def __init__(self, name: str, seed: bytes) -> None:
        self.name = check_name(name)
        opaque8(name, what="an ML-DSA-44 cosigner's name")
        if len(seed) != SEED_SIZE:
            raise TlogFormatError(f"an ML-DSA-44 seed is {SEED_SIZE} bytes, not {len(seed)}")
        self.seed = seed
        self._key = MLDSA44PrivateKey.from_seed_bytes(seed)
        self.public = self._key.public_key().public_bytes_raw()
        self.key_id = key_id(name, COSIGNATURE_MLDSA44, self.public)

    @classmethod
    def from_skey(cls, skey: str) -> MLDSA44Cosigner:
        """A cosigner from ``PRIVATE+KEY+<name>+<hex key id>+base64(0x06 || seed)``."""
        name, seed, hex_id = read_skey(skey, COSIGNATURE_MLDSA44, what="ML-DSA-44 cosigner")
        return checked_id(cls(name, seed), hex_id, what="ML-DSA-44 cosigner")

    def skey(self) -> str:
        return skey_text(self.name, self.key_id, COSIGNATURE_MLDSA44, self.seed)

    def verifier(self) -> MLDSA44CosignatureVerifier:
        return MLDSA44CosignatureVerifier(self.name, self.public)

    def vkey(self) -> str:
        return self.verifier().vkey()

    def cosign(self, text: str, timestamp: int) -> Signature:
        """The cosignature of checkpoint ``text`` at ``timestamp`` (never 0: the witness protocol forbids it)."""
        if timestamp <= 0:
            raise TlogFormatError("a witness's cosignature carries the time it was made, never 0")
        signed = self._key.sign(cosigned_message(self.name, timestamp, text))
        return Signature(self.name, self.key_id, timestamp.to_bytes(8, "big") + signed)
