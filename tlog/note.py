"""C2SP signed-note v1.0.0: notes, Ed25519 signatures (type 0x01), key ids and verifier keys.

A note is text ending in a newline, a blank line, then signature lines ``— <name> base64(key id || sig)``.
Key ids are ``SHA-256(name || 0x0A || type || public key)[:4]``; a verifier key (vkey) is
``<name>+<8 hex key id>+base64(type || public key)``; a signer key (skey), as Go's
``golang.org/x/mod/sumdb/note`` writes it, ``PRIVATE+KEY+<name>+<8 hex key id>+base64(type || seed)``.
Every key type here keeps a 32-byte seed (Ed25519's private key; ML-DSA-44's FIPS 204 key generation
seed), whatever the size of its public key.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from tlog.errors import TlogFormatError, VerificationError
from tlog.hashes import HASH_SIZE

ED25519 = 0x01
COSIGNATURE_V1 = 0x04  # tlog-cosignature's timestamped Ed25519 (tlog/cosignature.py)
COSIGNATURE_MLDSA44 = 0x06  # tlog-cosignature's ML-DSA-44 subtree/v1 (tlog/cosignature.py)
SEED_SIZE = 32
SEED_KINDS = {ED25519: "Ed25519", COSIGNATURE_V1: "Ed25519", COSIGNATURE_MLDSA44: "ML-DSA-44"}
DASH = "\u2014 "
MAX_SIGNATURES = 100  # a verifier's bound: the spec asks at least 16 be accepted


def check_name(name: str, *, what: str = "key name") -> str:
    """A key name (or origin): non-empty, without Unicode spaces or ``+``."""
    if not name or "+" in name or any(c.isspace() for c in name) or not name.isprintable():
        raise TlogFormatError(f"{what} {name!r} must be non-empty, printable, without spaces or '+'")
    return name


def key_id(name: str, sig_type: int, public: bytes) -> int:
    """The uint32 key id: the first four bytes of SHA-256(name || 0x0A || type || public key)."""
    digest = hashlib.sha256(name.encode() + b"\n" + bytes([sig_type]) + public).digest()
    return int.from_bytes(digest[:4], "big")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def unb64(text: str, *, what: str) -> bytes:
    """Standard padded base64, strictly: anything else is TlogFormatError naming ``what``."""
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as error:
        raise TlogFormatError(f"{what} is not standard base64: {error}") from None


def unb64_hash(text: str, *, what: str) -> bytes:
    """A SHA-256 hash in standard padded base64 (a root, a proof's line): TlogFormatError naming ``what`` otherwise."""
    raw = unb64(text, what=what)
    if len(raw) != HASH_SIZE:
        raise TlogFormatError(f"{what} is {len(raw)} bytes, not {HASH_SIZE}")
    return raw


def read_skey(skey: str, key_type: int, *, what: str) -> tuple[str, bytes, str]:
    """The name, seed and hex key id of a private key ``PRIVATE+KEY+<name>+<hex key id>+base64(type || seed)``
    (the note signer-key form) of ``key_type``; TlogFormatError naming ``what`` otherwise."""
    parts = skey.strip().split("+", 4)
    if len(parts) != 5 or parts[:2] != ["PRIVATE", "KEY"]:
        raise TlogFormatError(f"a {what} key is PRIVATE+KEY+<name>+<hex key id>+<base64 key>")
    raw = unb64(parts[4], what=f"the {what} key's key")
    if len(raw) != 1 + SEED_SIZE or raw[0] != key_type:
        found = f"type 0x{raw[0]:02x}, {len(raw) - 1} bytes" if raw else "empty"
        raise TlogFormatError(f"the {what} key is not a type 0x{key_type:02x} {SEED_KINDS[key_type]} key "
                              f"of a {SEED_SIZE}-byte seed ({found})")
    return parts[2], raw[1:], parts[3]


def checked_id(signer, hex_id: str, *, what: str):
    """``signer`` when its key id is ``hex_id`` (the id a private key's text names); TlogFormatError otherwise."""
    if f"{signer.key_id:08x}" != hex_id:
        raise TlogFormatError(f"the {what} key's id {hex_id} does not match its name and key")
    return signer


def skey_text(name: str, key_id_: int, key_type: int, seed: bytes) -> str:
    """The private key's text, as ``read_skey`` reads it."""
    return f"PRIVATE+KEY+{name}+{key_id_:08x}+{b64(bytes([key_type]) + seed)}"


@dataclass(frozen=True)
class Signature:
    """One signature line: the signer's name, its key id, the signature bytes after the id."""

    name: str
    key_id: int
    signature: bytes

    def line(self) -> str:
        return f"{DASH}{self.name} {b64(self.key_id.to_bytes(4, 'big') + self.signature)}\n"


class Verifier(Protocol):
    name: str
    key_id: int

    def verify(self, text: bytes, signature: bytes) -> bool: ...


@dataclass(frozen=True)
class Ed25519Verifier:
    """Checks type 0x01 signatures: Ed25519 over the note text."""

    name: str
    public: bytes

    @property
    def key_id(self) -> int:
        return key_id(self.name, ED25519, self.public)

    def verify(self, text: bytes, signature: bytes) -> bool:
        try:
            Ed25519PublicKey.from_public_bytes(self.public).verify(signature, text)
            return True
        except (InvalidSignature, ValueError):
            return False

    def vkey(self) -> str:
        return vkey_text(self.name, ED25519, self.public)


class Ed25519Signer:
    """Signs notes with one Ed25519 key under one name."""

    def __init__(self, name: str, seed: bytes) -> None:
        self.name = check_name(name)
        if len(seed) != 32:
            raise TlogFormatError(f"an Ed25519 seed is 32 bytes, not {len(seed)}")
        self.seed = seed
        self._key = Ed25519PrivateKey.from_private_bytes(seed)
        self.public = self._key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        self.key_id = key_id(self.name, ED25519, self.public)

    @classmethod
    def generate(cls, name: str) -> Ed25519Signer:
        seed = Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
        )
        return cls(name, seed)

    @classmethod
    def from_skey(cls, skey: str) -> Ed25519Signer:
        """A signer from ``PRIVATE+KEY+<name>+<hex id>+base64(0x01 || seed)``."""
        name, seed, hex_id = read_skey(skey, ED25519, what="signer")
        return checked_id(cls(name, seed), hex_id, what="signer")

    def skey(self) -> str:
        return skey_text(self.name, self.key_id, ED25519, self.seed)

    def verifier(self) -> Ed25519Verifier:
        return Ed25519Verifier(self.name, self.public)

    def vkey(self) -> str:
        return self.verifier().vkey()

    def sign(self, text: bytes) -> Signature:
        return Signature(self.name, self.key_id, self._key.sign(text))


def vkey_text(name: str, sig_type: int, public: bytes) -> str:
    return f"{check_name(name)}+{key_id(name, sig_type, public):08x}+{b64(bytes([sig_type]) + public)}"


@dataclass(frozen=True)
class Note:
    """A note's text (ending in a newline) and its signatures, in order."""

    text: str
    signatures: tuple[Signature, ...]

    def format(self) -> str:
        return self.text + "\n" + "".join(s.line() for s in self.signatures)


def sign_note(text: str, signers: Iterable[Ed25519Signer]) -> str:
    """The signed note of ``text`` (which must end in a newline) by each signer."""
    check_text(text)
    return Note(text, tuple(s.sign(text.encode()) for s in signers)).format()


def check_text(text: str) -> None:
    if not text.endswith("\n"):
        raise TlogFormatError("a note's text must end in a newline")
    bad = next((i for i, c in enumerate(text) if ord(c) < 0x20 and c != "\n"), None)
    if bad is not None:
        raise TlogFormatError(f"a note may hold no control character but newline (found {ord(text[bad]):#04x} at {bad})")


def parse_note(data: bytes | str) -> Note:
    """A note and its signature lines, or TlogFormatError saying which line is wrong."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as error:
            raise TlogFormatError(f"a note must be UTF-8: {error}") from None
    split = data.rfind("\n\n")
    if split < 0:
        raise TlogFormatError("a note needs a blank line between its text and its signatures")
    text, block = data[: split + 1], data[split + 2 :]
    check_text(text)
    if not block.endswith("\n"):
        raise TlogFormatError("a note's last signature line must end in a newline")
    lines = block[:-1].split("\n")
    if len(lines) > MAX_SIGNATURES:
        raise TlogFormatError(f"a note with {len(lines)} signatures: at most {MAX_SIGNATURES} are read")
    return Note(text, tuple(parse_signature_line(line, number=n + 1) for n, line in enumerate(lines)))


def parse_signature_line(line: str, *, number: int = 1) -> Signature:
    if not line.startswith(DASH) or line.count(" ") != 2:
        raise TlogFormatError(f"signature line {number} is not '\u2014 <name> <base64 signature>': {line[:80]!r}")
    name, sig = line[len(DASH) :].split(" ")
    raw = unb64(sig, what=f"signature line {number}")
    if len(raw) < 5:
        raise TlogFormatError(f"signature line {number} is {len(raw)} bytes, shorter than a key id and a signature")
    return Signature(check_name(name), int.from_bytes(raw[:4], "big"), raw[4:])


def open_note(data: bytes | str, verifiers: Sequence[Verifier]) -> tuple[Note, list[Signature]]:
    """The note and the signatures of known keys, all verified; VerificationError when none, or one fails."""
    note = parse_note(data)
    known = {(v.name, v.key_id): v for v in verifiers}
    verified = []
    for sig in note.signatures:
        verifier = known.get((sig.name, sig.key_id))
        if verifier is None:
            continue
        if not verifier.verify(note.text.encode(), sig.signature):
            raise VerificationError(f"the signature of {sig.name} (key {sig.key_id:08x}) does not verify")
        verified.append(sig)
    if not verified:
        names = ", ".join(f"{v.name}+{v.key_id:08x}" for v in verifiers) or "none"
        raise VerificationError(f"the note carries no signature of a known key (known: {names})")
    return note, verified
