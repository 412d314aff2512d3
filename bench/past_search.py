"""Search as of a past point: what the past search's statement index (services/read_api/search_text.py) costs
to build once per point and to search, against SQLite's FTS5 doing the same on the same statements directly.

    python bench/past_search.py [--claims 100000] [--searches 500] [--postgres URL]

The statements are the read API benchmark's (tests/builders/workload.py: common words and three topic words each,
so a search for a topic word matches a few claims in a thousand). A search is one topic word ranked by
relevance, the first 50 claims taken. The index on SQLite is an in-memory FTS5 table of the present search's
tokenizer, so the peer (a bare in-memory FTS5 table with the tokenizer of migration 0003: its build, and
``MATCH`` ordered by ``bm25()``) shows what the index's own work adds. With ``--postgres``, the index of
PostgreSQL (the server's tsvectors, ranked by ``ts_rank``) is timed too, without a peer.
"""

from __future__ import annotations

import importlib
import random
import sqlite3
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402
from sqlalchemy import create_engine  # noqa: E402

from bench.common import arguments, percentile  # noqa: E402
from bench.results import record  # noqa: E402
from services.read_api.search_text import Fts5Index, StatementIndex, TsVectorIndex  # noqa: E402
from tests.builders.workload import TOPICS, statement  # noqa: E402

SEARCH_MIGRATION = importlib.import_module("migrations.versions.0003_listing_search")


def index_searches(index: StatementIndex, words: list[str]) -> list[float]:
    """Milliseconds per search: every match scored, the first 50 by relevance taken."""
    times = []
    for word in words:
        start = time.perf_counter()
        scores = index.scores(word)
        sorted(scores.items(), key=lambda item: (item[1], item[0]), reverse=True)[:50]
        times.append((time.perf_counter() - start) * 1000)
    return times


def fts5(statements: list[tuple[str, str]], words: list[str]) -> tuple[float, list[float]]:
    """The peer: seconds to build an FTS5 index of the statements, and milliseconds per ranked search."""
    conn = sqlite3.connect(":memory:")
    table = SEARCH_MIGRATION.SQLITE_SEARCH_TABLE.replace("content='claim_pages', content_rowid='first_seq', ", "")
    conn.execute(table)
    start = time.perf_counter()
    with conn:
        conn.executemany("INSERT INTO claim_pages_search(rowid, statement) VALUES (?, ?)",
                         ((n, text) for n, (_, text) in enumerate(statements, 1)))
    built = time.perf_counter() - start
    times = []
    for word in words:
        start = time.perf_counter()
        conn.execute("SELECT rowid FROM claim_pages_search WHERE claim_pages_search MATCH ? "
                     "ORDER BY bm25(claim_pages_search) LIMIT 50", (f'"{word}"',)).fetchall()
        times.append((time.perf_counter() - start) * 1000)
    return built, times


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--claims", type=int, default=100_000)
    parser.add_argument("--searches", type=int, default=500)
    parser.add_argument("--postgres", help="a PostgreSQL URL: time the PostgreSQL index too")
    args = parser.parse_args()
    rng = random.Random(1)
    statements = [(f"CLM-{n:06d}", statement(rng)) for n in range(args.claims)]
    words = [rng.choice(TOPICS) for _ in range(args.searches)]
    table = Table("what", "statements/s", "search p50 ms", "search p99 ms")
    start = time.perf_counter()
    index = Fts5Index(statements)
    built = time.perf_counter() - start
    searched = index_searches(index, words)
    table.add_row("past search index, SQLite", f"{args.claims / built:,.0f}", f"{percentile(searched, 50):.3f}", f"{percentile(searched, 99):.3f}")
    peer_built, peer_searched = fts5(statements, words)
    table.add_row("peer: FTS5 in memory", f"{args.claims / peer_built:,.0f}",
                  f"{percentile(peer_searched, 50):.3f}", f"{percentile(peer_searched, 99):.3f}")
    if args.postgres:
        engine = create_engine(args.postgres)
        start = time.perf_counter()
        tsvectors = TsVectorIndex(statements, engine)
        pg_built = time.perf_counter() - start
        pg_searched = index_searches(tsvectors, words)
        table.add_row("past search index, PostgreSQL", f"{args.claims / pg_built:,.0f}",
                      f"{percentile(pg_searched, 50):.3f}", f"{percentile(pg_searched, 99):.3f}")
        tsvectors.close()
        engine.dispose()
    Console().print(table)
    record("past search index build (SQLite rules)", args.claims / built, unit="statements/s", peer=args.claims / peer_built)
    record("past search p99 (SQLite rules)", percentile(searched, 99), unit="ms", peer=percentile(peer_searched, 99))

if __name__ == "__main__":
    main()
