"""The registry's own delegate key: the private key the API (and ``claimlog ingest`` beside it) signs with
on a registry ``claimlog up`` runs, kept in the data directory like the NATS passwords.

``claimlog up`` makes it at the first start of a new registry and registers its public half as the
delegate of ``API_ACTOR`` (services/orchestration/trust.py); ``claimlog backup`` keeps a copy. A
process reaching the data directory's own NATS (no ``CLAIMLOG_NATS_URL``) signs with it when
``CLAIMLOG_SIGNING_KEY`` names no other key, so a producer started from a second terminal signs as the
running API does.
"""

from __future__ import annotations

import os
from pathlib import Path

from events.subjects import DEFAULT_STREAM
from services.log.signing import Signer

API_ACTOR = "claimlog-api"  # the service actor the registry's delegate key belongs to


def registry_key_file(data_dir: Path, stream: str = DEFAULT_STREAM) -> Path:
    """Where the data directory keeps the delegate key of the registry on ``stream`` (each registry has its own)."""
    name = "delegate-key.pem" if stream == DEFAULT_STREAM else f"delegate-key-{stream}.pem"
    return data_dir / name


def write_registry_key(path: Path, signer: Signer) -> None:
    """The private key, owner-only from its first byte; an existing file is never overwritten."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(signer.pem())
