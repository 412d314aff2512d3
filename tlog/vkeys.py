"""Verifier keys (signed-note v1.0.0, ``<name>+<8 hex key id>+base64(type || key)``) of either kind of signer."""

from __future__ import annotations

import re

from tlog.cosignature import CosignatureVerifier
from tlog.errors import TlogFormatError
from tlog.note import COSIGNATURE_V1, ED25519, Ed25519Verifier, Verifier, check_name, key_id, unb64


def parse_vkey(vkey: str) -> Verifier:
    """The verifier a vkey names: Ed25519 note keys (0x01) and Ed25519 cosigners (0x04)."""
    parts = vkey.strip().split("+", 2)
    if len(parts) != 3 or not re.fullmatch(r"[0-9a-f]{8}", parts[1]):
        raise TlogFormatError(f"{vkey!r} is not a verifier key: want <name>+<8 hex key id>+<base64 key>")
    name = check_name(parts[0])
    raw = unb64(parts[2], what="the verifier key's key")
    if len(raw) != 33 or raw[0] not in (ED25519, COSIGNATURE_V1):
        raise TlogFormatError(f"verifier key {name!r}: only Ed25519 keys (type 0x01 or 0x04, 32 bytes) are known")
    if f"{key_id(name, raw[0], raw[1:]):08x}" != parts[1]:
        raise TlogFormatError(f"verifier key {name!r}: key id {parts[1]} does not match the name and key")
    if raw[0] == ED25519:
        return Ed25519Verifier(name, raw[1:])
    return CosignatureVerifier(name, raw[1:])
