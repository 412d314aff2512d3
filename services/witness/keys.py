"""The witness's own cosigning key, in its directory (owner-only), and the logs it is told to witness."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from tlog.cosignature import Cosigner
from tlog.note import Verifier, check_name
from tlog.vkeys import parse_vkey

KEY_FILE = "witness.key"


def witness_key(directory: Path, name: str | None) -> Cosigner:
    """The witness's key in ``directory``, made under ``name`` on first use; its name never changes."""
    path = directory / KEY_FILE
    if path.exists():
        cosigner = Cosigner.from_skey(path.read_text())
        if name is not None and name != cosigner.name:
            raise ValueError(f"{path} is the key of witness {cosigner.name!r}, not {name!r}")
        return cosigner
    if name is None:
        raise ValueError(f"no witness key in {directory}: give the witness a --name (a schema-less URL) to make one")
    cosigner = Cosigner(check_name(name, what="witness name"), os.urandom(32))
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(cosigner.skey() + "\n")
    return cosigner


def witnessed_logs(vkeys: Iterable[str]) -> dict[str, Sequence[Verifier]]:
    """Origin -> the log's keys, from ``[<origin>=]<vkey>`` (the origin is the key's name unless given)."""
    logs: dict[str, list[Verifier]] = {}
    for text in vkeys:
        origin, sep, vkey = text.partition("=")
        if not sep or "+" in origin:  # no origin given: a vkey's base64 may hold '='
            origin, vkey = "", text
        verifier = parse_vkey(vkey)
        logs.setdefault(origin or verifier.name, []).append(verifier)
    return logs
