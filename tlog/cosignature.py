"""C2SP tlog-cosignature v1.0.1, Ed25519: a witness's timestamped ``cosignature/v1`` over a checkpoint.

The signed message is ``cosignature/v1\\ntime <timestamp>\\n`` followed by the checkpoint's note text;
the signature line carries the 8-byte big-endian timestamp, then the 64-byte Ed25519 signature. The
key id uses signature type 0x04, so a cosigner's key never verifies as a log's key.
"""

from __future__ import annotations

from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from tlog.errors import TlogFormatError
from tlog.note import (
    COSIGNATURE_V1,
    Ed25519Signer,
    Signature,
    checked_id,
    key_id,
    read_skey,
    skey_text,
    vkey_text,
)


def message(text: str | bytes, timestamp: int) -> bytes:
    """The bytes a cosigner signs for the checkpoint ``text`` at ``timestamp`` (POSIX seconds)."""
    if not 0 <= timestamp < 1 << 63:
        raise TlogFormatError(f"a cosignature's timestamp {timestamp} is outside 0..2**63-1")
    body = text.encode() if isinstance(text, str) else text
    return b"cosignature/v1\ntime %d\n" % timestamp + body


def timestamp_of(signature: Signature) -> int:
    """The time a cosignature was made, from its first eight bytes."""
    if len(signature.signature) != 72:
        raise TlogFormatError(f"an Ed25519 cosignature is 72 bytes after the key id, not {len(signature.signature)}")
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
        if len(signature) != 72:
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
    """A witness's signing key: cosignatures of checkpoints at a given time."""

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
