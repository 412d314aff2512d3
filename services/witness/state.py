"""The witness's durable state: per origin, the last checkpoint it cosigned; and the evidence of forks.

SQLite (the standard library's), one file in the witness's directory. A request is checked and its
checkpoint stored in one ``BEGIN IMMEDIATE`` transaction, so two requests never both pass against the
same held size (tlog-witness: the check and the store are atomic, or a cosigned size could go back).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

from tlog.checkpoint import Checkpoint, parse_checkpoint
from tlog.note import parse_note

SCHEMA = """
create table if not exists held (origin text primary key, size integer not null, note text not null, at real not null);
create table if not exists evidence (id integer primary key, origin text not null, held_note text not null,
                                     submitted_note text not null, reason text not null, at real not null);
"""


class WitnessState:
    """The held checkpoints and the evidence, in ``path``."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute("pragma journal_mode=wal")
        self._db.execute("pragma synchronous=full")
        self._db.executescript(SCHEMA)
        self._lock = threading.Lock()

    def held(self, origin: str) -> tuple[Checkpoint, str] | None:
        row = self._db.execute("select note from held where origin = ?", (origin,)).fetchone()
        return None if row is None else (parse_checkpoint(parse_note(row[0]).text), row[0])

    def atomically(self, origin: str, decide: Callable[[Checkpoint | None], tuple[Checkpoint, str] | None]) -> None:
        """Run ``decide(held)`` and store what it returns (a checkpoint and its note) in one transaction."""
        with self._lock:
            self._db.execute("begin immediate")
            try:
                found = self.held(origin)
                stored = decide(found[0] if found else None)
                if stored is not None:
                    self._db.execute(
                        "insert into held (origin, size, note, at) values (?, ?, ?, ?) "
                        "on conflict(origin) do update set size = excluded.size, note = excluded.note, at = excluded.at",
                        (origin, stored[0].size, stored[1], time.time()),
                    )
                self._db.execute("commit")
            except BaseException:
                self._db.execute("rollback")
                raise

    def keep_evidence(self, origin: str, submitted: str, reason: str) -> None:
        """Keep a log's checkpoint that is inconsistent with the held one, beside it."""
        with self._lock:
            found = self.held(origin)
            self._db.execute(
                "insert into evidence (origin, held_note, submitted_note, reason, at) values (?, ?, ?, ?, ?)",
                (origin, found[1] if found else "", submitted, reason, time.time()),
            )

    def evidence(self, origin: str) -> list[tuple[str, str, str]]:
        rows = self._db.execute("select held_note, submitted_note, reason from evidence where origin = ? order by id", (origin,))
        return [tuple(row) for row in rows]

    def close(self) -> None:
        self._db.close()
