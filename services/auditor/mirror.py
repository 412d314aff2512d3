"""The auditor's own copy of a log: the pinned key, the last checkpoint it verified, every tile and bundle.

Files under the audit directory: ``vkey`` (pinned on first use, or given), ``checkpoint`` (the last
verified note), ``tile/...`` (each tile and bundle as served, under its C2SP path) and ``evidence-*``
(both checkpoints of a fork). A mirror grows only by verified tiles.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from tlog.tiles import Tile


class Mirror:
    """The files of one audited log."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)

    def _read(self, name: str) -> str | None:
        try:
            return (self.directory / name).read_text()
        except FileNotFoundError:
            return None

    def _write(self, name: str, data: bytes) -> None:
        path = self.directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        staged = path.with_name(f".{path.name}.{os.getpid()}")
        staged.write_bytes(data)
        os.replace(staged, path)

    def vkey(self) -> str | None:
        found = self._read("vkey")
        return None if found is None else found.strip()

    def pin(self, vkey: str) -> None:
        self._write("vkey", (vkey.strip() + "\n").encode())

    def checkpoint(self) -> str | None:
        return self._read("checkpoint")

    def keep_checkpoint(self, note: str) -> None:
        self._write("checkpoint", note.encode())

    def tile(self, tile: Tile) -> bytes:
        return (self.directory / tile.path()).read_bytes()

    def has(self, tile: Tile) -> bool:
        return (self.directory / tile.path()).is_file()

    def keep_tile(self, tile: Tile, data: bytes) -> None:
        self._write(tile.path(), data)

    def keep_evidence(self, held: str, served: str, reason: str) -> Path:
        name = f"evidence-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.txt"
        self._write(name, f"{reason}\n\n--- the checkpoint verified before\n{held}\n--- the checkpoint served now\n{served}".encode())
        return self.directory / name
