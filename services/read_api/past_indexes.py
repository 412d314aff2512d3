"""Where past searches' statement indexes are built, and how many are kept.

A search of a listing as of a past point needs the statements of every claim as of then, indexed by the
database's own search code (``search_text.statement_index``): seconds of work for tens of thousands of claims. It runs in this
process's own few threads (``BUILDERS``), never on the event loop nor in the threads the plain pages read
the database in: 20 searches at distinct past points stalled every plain page for seconds when the index
was built on the loop. Searches at one point wait for that point's one build. Kept indexes are bounded in
number (``KEEP``) and in the characters of the statements they index (``MAX_CHARS``), the oldest used
dropped first.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from sqlalchemy import Engine

from services.read_api.search_text import StatementIndex, statement_index

KEEP = 4  # points of the log whose statement index is kept (as many as their summaries)
MAX_CHARS = 32_000_000  # characters of statements the kept indexes hold at most (the newest is kept whatever its size)
BUILDERS = 2  # threads past listings are read and their indexes built in
T = TypeVar("T")


class PastIndexes:
    """The statement indexes of the last few points of the log searched, each built once, in threads of their own."""

    def __init__(self, *, keep: int = KEEP, max_chars: int = MAX_CHARS, builders: int = BUILDERS) -> None:
        self._keep, self._max_chars = keep, max_chars
        self._kept: OrderedDict[tuple[int, str], tuple[StatementIndex, int]] = OrderedDict()
        self._building: dict[tuple[int, str], threading.Lock] = {}
        self._lock = threading.Lock()
        self._builders = builders
        self._executor: ThreadPoolExecutor | None = None
        self.built = 0  # indexes built so far (each point once while it is kept)

    async def run(self, work: Callable[[], T]) -> T:
        """``work`` (a past listing, which may build an index) in the past searches' own threads."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self._builders, thread_name_prefix="claimlog-past-search")
        return await asyncio.get_running_loop().run_in_executor(self._executor, work)

    def at(self, seq: int, engine: Engine, rows: list[dict]) -> StatementIndex:
        """The index of ``rows`` (every claim's summary as of ``seq``), by the search of ``engine``'s database; built once."""
        key = (seq, engine.dialect.name)
        with self._lock:
            if key in self._kept:
                self._kept.move_to_end(key)
                return self._kept[key][0]
            building = self._building.setdefault(key, threading.Lock())
        with building:  # a second search at the same point waits for the first one's build
            with self._lock:
                if key in self._kept:
                    return self._kept[key][0]
            index = statement_index(((row["claim_id"], row["statement"]) for row in rows), engine)
            with self._lock:
                self.built += 1
                self._kept[key] = (index, sum(len(row["statement"]) for row in rows))
                self._building.pop(key, None)
                self._evict()
        return index

    def _evict(self) -> None:
        while len(self._kept) > 1 and (len(self._kept) > self._keep or self.kept_chars > self._max_chars):
            _, (dropped, _) = self._kept.popitem(last=False)
            dropped.close()  # its temporary table and connection (PostgreSQL); SQLite's goes with the index

    @property
    def kept_chars(self) -> int:
        return sum(size for _, size in self._kept.values())

    def __len__(self) -> int:
        return len(self._kept)
