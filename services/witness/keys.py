"""The witness's own cosigning keys, in its directory (owner-only), and the logs it is told to witness.

A witness keeps two keys under one name: Ed25519 (``witness.key``, tlog-cosignature type 0x04) and
ML-DSA-44 (``witness-mldsa44.key``, type 0x06), and answers each checkpoint with a cosignature of each, so
a client configured with either key finds its own. A directory made before the ML-DSA-44 key existed gains
it at its next start, under the name its Ed25519 key already has.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tlog.cosignature import Cosigner, MLDSA44Cosigner, opaque8
from tlog.errors import TlogFormatError
from tlog.note import Verifier, check_name
from tlog.vkeys import parse_vkey

KEY_FILE = "witness.key"
MLDSA44_KEY_FILE = "witness-mldsa44.key"


@dataclass(frozen=True)
class WitnessKeys:
    """The witness's two keys, under one name."""

    ed25519: Cosigner
    mldsa44: MLDSA44Cosigner

    @property
    def cosigners(self) -> tuple[Cosigner | MLDSA44Cosigner, ...]:
        """The keys the witness cosigns with, in the order of its answer's lines."""
        return self.ed25519, self.mldsa44


def witness_keys(directory: Path, name: str | None) -> WitnessKeys:
    """Both keys of the witness in ``directory``, each made on first use under the witness's name, which never changes."""
    ed25519 = witness_key(directory, name)
    path = directory / MLDSA44_KEY_FILE
    try:
        mldsa44 = MLDSA44Cosigner.from_skey(path.read_text()) if path.exists() else None
        if mldsa44 is None:
            mldsa44 = MLDSA44Cosigner(ed25519.name, os.urandom(32))
            _write_private(path, mldsa44.skey())
    except TlogFormatError as error:
        raise ValueError(f"{path}: {error}") from None
    if mldsa44.name != ed25519.name:
        raise ValueError(f"{path} is the ML-DSA-44 key of witness {mldsa44.name!r}, and {directory / KEY_FILE} "
                         f"that of {ed25519.name!r}: a witness's keys share its name")
    return WitnessKeys(ed25519, mldsa44)


def witness_key(directory: Path, name: str | None) -> Cosigner:
    """The witness's Ed25519 key in ``directory``, made under ``name`` on first use; its name never changes."""
    path = directory / KEY_FILE
    if path.exists():
        cosigner = Cosigner.from_skey(path.read_text())
        if name is not None and name != cosigner.name:
            raise ValueError(f"{path} is the key of witness {cosigner.name!r}, not {name!r}")
        return cosigner
    if name is None:
        raise ValueError(f"no witness key in {directory}: give the witness a --name (a schema-less URL) to make one")
    opaque8(check_name(name, what="witness name"), what="the witness name")  # what an ML-DSA-44 cosignature can name
    cosigner = Cosigner(name, os.urandom(32))
    _write_private(path, cosigner.skey())
    return cosigner


def _write_private(path: Path, skey: str) -> None:
    """A new key file, readable by its owner only; never over an existing one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(skey + "\n")


def witnessed_logs(vkeys: Iterable[str]) -> dict[str, Sequence[Verifier]]:
    """Origin -> the log's keys, from ``[<origin>=]<vkey>`` (the origin is the key's name unless given)."""
    logs: dict[str, list[Verifier]] = {}
    for text in vkeys:
        origin, sep, vkey = text.partition("=")
        if not sep or "+" in origin:  # no origin given: a vkey's base64 may hold '='
            origin, vkey = "", text
        verifier = parse_vkey(vkey)
        origin = origin or verifier.name
        opaque8(origin, what="the log's origin")  # an ML-DSA-44 cosignature names it in at most 255 bytes
        logs.setdefault(origin, []).append(verifier)
    return logs
