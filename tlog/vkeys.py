"""Verifier keys (signed-note v1.0.0, ``<name>+<8 hex key id>+base64(type || key)``) of every kind of signer."""

from __future__ import annotations

import re

from tlog.cosignature import MLDSA44_PUBLIC_SIZE, CosignatureVerifier, MLDSA44CosignatureVerifier
from tlog.errors import TlogFormatError
from tlog.note import (
    COSIGNATURE_MLDSA44,
    COSIGNATURE_V1,
    ED25519,
    Ed25519Verifier,
    Verifier,
    check_name,
    key_id,
    unb64,
)

KINDS = {  # type -> what signs with it, its public key's size, its verifier
    ED25519: ("Ed25519 note signer", 32, Ed25519Verifier),
    COSIGNATURE_V1: ("Ed25519 cosigner", 32, CosignatureVerifier),
    COSIGNATURE_MLDSA44: ("ML-DSA-44 cosigner", MLDSA44_PUBLIC_SIZE, MLDSA44CosignatureVerifier),
}


def parse_vkey(vkey: str) -> Verifier:
    """The verifier a vkey names: Ed25519 note keys (0x01), Ed25519 cosigners (0x04), ML-DSA-44 cosigners (0x06)."""
    parts = vkey.strip().split("+", 2)
    if len(parts) != 3 or not re.fullmatch(r"[0-9a-f]{8}", parts[1]):
        raise TlogFormatError(f"{vkey[:80]!r} is not a verifier key: want <name>+<8 hex key id>+<base64 key>")
    name = check_name(parts[0])
    raw = unb64(parts[2], what=f"verifier key {name!r}'s key")
    if not raw or raw[0] not in KINDS:
        known = ", ".join(f"0x{t:02x} ({kind})" for t, (kind, _, _) in KINDS.items())
        found = f"type 0x{raw[0]:02x}" if raw else "an empty key"
        raise TlogFormatError(f"verifier key {name!r} is {found}: the known types are {known}")
    kind, size, verifier = KINDS[raw[0]]
    if len(raw) - 1 != size:
        raise TlogFormatError(f"verifier key {name!r}: a type 0x{raw[0]:02x} ({kind}) key is {size} bytes, not {len(raw) - 1}")
    if f"{key_id(name, raw[0], raw[1:]):08x}" != parts[1]:
        raise TlogFormatError(f"verifier key {name!r}: key id {parts[1]} does not match the name and key")
    return verifier(name, raw[1:])
