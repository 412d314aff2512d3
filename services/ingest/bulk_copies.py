"""The counts of identical lines of the claims a bulk ingestion's cache has let go, kept until the run ends.

A line's derived event id numbers it among the identical lines of its claim before it (``bulk_lines``),
so the count must outlive the claim's slot in the cache: a copy after the claim was evicted and read
again would otherwise take the first copy's id and count as present. The counts go to a temporary
SQLite database (stdlib, a file removed when it closes, its pages cached up to a fixed size), so the
ingestion's memory stays bounded by the claims it holds, not by the file: one row a claim evicted,
written when it leaves and read when it comes back. A run that never evicts never opens it.
"""

from __future__ import annotations

import sqlite3
from array import array
from collections import Counter
from collections.abc import Iterable

QUERY_SIZE = 500  # claims asked in one query (below SQLite's limit on parameters)


class EvictedCopies:
    """Per evicted claim, the counts of its identical lines (by the line's ``hash()``) so far in the run."""

    def __init__(self) -> None:
        self._db: sqlite3.Connection | None = None

    def keep(self, evicted: Iterable[tuple[str, Counter[int]]]) -> None:
        """Keep the counts of claims leaving the cache (replacing what an earlier eviction kept)."""
        rows = [(claim_id, _packed(copies)) for claim_id, copies in evicted if copies]
        if rows:
            self._open().executemany("INSERT OR REPLACE INTO copies VALUES (?, ?)", rows)

    def take(self, claim_ids: Iterable[str]) -> dict[str, Counter[int]]:
        """The counts kept for those of ``claim_ids`` that were evicted (claims coming back into the cache)."""
        if self._db is None:
            return {}
        asked, found = list(claim_ids), {}
        for start in range(0, len(asked), QUERY_SIZE):
            chunk = asked[start : start + QUERY_SIZE]
            query = f"SELECT claim_id, counts FROM copies WHERE claim_id IN ({','.join('?' * len(chunk))})"
            found.update((claim_id, _unpacked(counts)) for claim_id, counts in self._db.execute(query, chunk))
        return found

    def close(self) -> None:
        """Drop the counts (the temporary database's file goes with its connection)."""
        if self._db is not None:
            self._db.close()
            self._db = None

    def _open(self) -> sqlite3.Connection:
        if self._db is None:
            self._db = sqlite3.connect("", isolation_level=None)  # "": a temporary file, removed on close
            self._db.execute("PRAGMA journal_mode = OFF")  # nothing to recover: the counts live as long as the run
            self._db.execute("CREATE TABLE copies (claim_id TEXT PRIMARY KEY, counts BLOB NOT NULL) WITHOUT ROWID")
        return self._db


def _packed(copies: Counter[int]) -> bytes:
    """Each line's hash and its count, as 64-bit integers one after the other."""
    return array("q", [n for pair in copies.items() for n in pair]).tobytes()


def _unpacked(counts: bytes) -> Counter[int]:
    numbers = array("q")
    numbers.frombytes(counts)
    return Counter(dict(zip(numbers[::2], numbers[1::2], strict=True)))
