"""The log's own signing key, kept in the data directory (never the API's delegate key).

The key file holds one signer key (``PRIVATE+KEY+<origin>+<key id>+<base64>``, as Go's
``golang.org/x/mod/sumdb/note`` writes them), readable by its owner only. Its name is the log's origin,
fixed when the tree is made: a file is made once, for a new tree, and never rewritten.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from tlog.errors import TlogFormatError
from tlog.note import Ed25519Signer, check_name


class LogKeyError(ValueError):
    """The log key is missing, unreadable, or not the tree's."""


def key_path(data_dir: Path, stream: str) -> Path:
    """Where the log key of the transparency log over ``stream`` is kept."""
    return data_dir / "tlog" / f"{stream}.key"


def local_origin(stream: str) -> str:
    """A unique origin for a registry that names none: several registries may share a server."""
    return f"claimlog.local/{stream.lower()}/{secrets.token_hex(6)}"


def load_signer(path: Path) -> Ed25519Signer | None:
    """The log key in ``path``, or None when there is no file."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    try:
        return Ed25519Signer.from_skey(text)
    except TlogFormatError as error:
        raise LogKeyError(f"{path}: not a log key ({error})") from None


def create_signer(path: Path, origin: str) -> Ed25519Signer:
    """A new log key named ``origin``, written to ``path`` (mode 0600); refused when the file exists."""
    check_name(origin, what="origin")
    signer = Ed25519Signer.generate(origin)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise LogKeyError(f"{path} already holds a log key: a log's key and origin are made once") from None
    with os.fdopen(fd, "w") as out:
        out.write(signer.skey() + "\n")
    return signer


def ensure_signer(path: Path, stream: str, origin: str | None = None) -> Ed25519Signer:
    """The log key in ``path``, made (with ``origin``, or a unique local one) when there is none."""
    found = load_signer(path)
    if found is not None:
        if origin is not None and found.name != origin:
            raise LogKeyError(f"{path} is the key of origin {found.name!r}, not {origin!r}: an origin never changes")
        return found
    return create_signer(path, origin or local_origin(stream))
