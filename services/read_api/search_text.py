"""Search over statements as of a past point of the log, by the database's own search code: the database's
full-text index holds the statements as they are now, so a past listing searches the pages folded as of then,
indexed by the same engine with the same configuration.

The query is read by one function for both the present and the past search (``search_terms``, which also
writes SQLite's FTS5 expression, ``fts5_query``): every word, "a phrase", -excluded, ``or`` between
alternatives; only statements are searched.

- SQLite: an in-memory FTS5 table per past point, with the tokenizer of migration 0003 (``porter unicode61
  remove_diacritics 2``), searched with the FTS5 expression the present search uses and ranked by its
  ``bm25()``; the IDF of each phrase is over the claims drafted by then, as the present index's is over the
  claims drafted by now, so at the head a past search ranks as the present search does.
- PostgreSQL: the server's own ``to_tsvector('english', statement)`` of each past statement, made once per
  point, searched with ``websearch_to_tsquery('english', q)`` and ranked by ``ts_rank``, as the present
  search does.

What differs from the present search: where the index lives. The present index is the read models'
(kept by the projector); a past point's is the API process's, built from the summaries folded for that point
and kept for the last few points searched: on SQLite in the process's memory, on PostgreSQL in a temporary
table with a GIN index, on a connection the index holds outside the API's pool (the server makes each
statement's vector, as its trigger makes the present ones).
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Iterable
from typing import Protocol

from sqlalchemy import Engine, create_engine, text
from sqlalchemy.pool import NullPool

from projections.tables import SQLITE_SEARCH_TABLE, SQLITE_SEARCH_TOKENIZE

TERM = re.compile(r'(-?)(?:"([^"]*)"?|(\S+))')
WORD = re.compile(r"\w+")
# The present search's FTS5 table (migration 0003), without its external content.
FTS5_NAME = SQLITE_SEARCH_TABLE
FTS5_TABLE = f"CREATE VIRTUAL TABLE {FTS5_NAME} USING fts5(statement, tokenize='{SQLITE_SEARCH_TOKENIZE}')"

Alternative = tuple[list[list[str]], list[list[str]]]  # wanted phrases, excluded phrases; each phrase its words


def search_terms(q: str) -> list[Alternative]:
    """A web-search query read as PostgreSQL's websearch_to_tsquery reads it: alternatives (``or`` between
    them), each with the phrases it wants and those it excludes; an alternative that wants nothing is left out."""
    alternatives: list[Alternative] = [([], [])]
    for negated, quoted, bare in TERM.findall(q):
        if bare.lower() == "or" and not negated:
            alternatives.append(([], []))
            continue
        if words := WORD.findall(quoted or bare):
            alternatives[-1][bool(negated)].append(words)
    return [alternative for alternative in alternatives if alternative[0]]


def fts5_query(q: str) -> str | None:
    """SQLite FTS5's expression for a web-search query, read by ``search_terms`` as PostgreSQL's
    websearch_to_tsquery reads it. None when it names no word to look for. Each phrase is quoted, so nothing a
    user types is taken as FTS5 syntax."""
    clauses = [
        " ".join(['"' + " ".join(words) + '"' for words in wanted] + [f'NOT "{" ".join(words)}"' for words in unwanted])
        for wanted, unwanted in search_terms(q)
    ]
    return " OR ".join(f"({clause})" for clause in clauses) or None


class StatementIndex(Protocol):
    """The statements of every claim at one point of the log, indexed once for many searches."""

    def scores(self, q: str) -> dict[str, float]:
        """The claims whose statement matches ``q``, each with its relevance (larger is better)."""
        ...

    def close(self) -> None:
        """Let go of what the index holds (its connection and table), once it is no longer kept."""
        ...


class Fts5Index:
    """SQLite's: the statements in an in-memory FTS5 table of the present search's tokenizer."""

    def __init__(self, statements: Iterable[tuple[str, str]]) -> None:
        self._claims: list[str] = []
        # Searched from the API's threads, one at a time.
        self._conn = sqlite3.connect(":memory:", check_same_thread=False)
        self._lock = threading.Lock()
        self._conn.execute(FTS5_TABLE)
        with self._conn:
            self._conn.executemany(f"INSERT INTO {FTS5_NAME}(rowid, statement) VALUES (?, ?)", self._numbered(statements))

    def _numbered(self, statements: Iterable[tuple[str, str]]) -> Iterable[tuple[int, str]]:
        for claim_id, statement in statements:
            self._claims.append(claim_id)
            yield len(self._claims) - 1, statement

    def scores(self, q: str) -> dict[str, float]:
        expression = fts5_query(q)
        if expression is None:
            return {}
        query = f"SELECT rowid, bm25({FTS5_NAME}) FROM {FTS5_NAME} WHERE {FTS5_NAME} MATCH ?"
        with self._lock:
            found = self._conn.execute(query, (expression,)).fetchall()
        return {self._claims[rowid]: -rank for rowid, rank in found}  # bm25(): lower is better

    def close(self) -> None:
        """Nothing to do: the in-memory table goes with the index's last reference (a search still using it keeps it)."""


class TsVectorIndex:
    """PostgreSQL's: each statement's ``to_tsvector('english', ...)`` in a temporary table with a GIN index, on a
    connection of the index's own, searched with ``websearch_to_tsquery`` and ranked by ``ts_rank``."""

    def __init__(self, statements: Iterable[tuple[str, str]], engine: Engine) -> None:
        self._claims: list[str] = []
        self._lock = threading.Lock()
        # A connection of its own, outside the API's pool: the temporary table lives as long as the index.
        self._engine = create_engine(engine.url, poolclass=NullPool)
        self._conn = self._engine.connect()
        try:
            self._conn.execute(text(
                "CREATE TEMP TABLE past_statements (n integer PRIMARY KEY, s text NOT NULL, "
                "v tsvector GENERATED ALWAYS AS (to_tsvector('english'::regconfig, s)) STORED)"
            ))
            with self._conn.connection.driver_connection.cursor() as cursor, cursor.copy("COPY past_statements (n, s) FROM STDIN") as copy:
                for claim_id, statement in statements:
                    copy.write_row((len(self._claims), statement))
                    self._claims.append(claim_id)
            self._conn.execute(text("CREATE INDEX ON past_statements USING gin (v)"))
            self._conn.execute(text("ANALYZE past_statements"))
            self._conn.commit()
        except BaseException:
            self.close()
            raise

    def scores(self, q: str) -> dict[str, float]:
        with self._lock:
            found = self._conn.execute(_RANKS, {"q": q}).all()
            self._conn.commit()
        return {self._claims[n]: rank for n, rank in found}

    def close(self) -> None:
        self._conn.close()
        self._engine.dispose()


_RANKS = text(
    "SELECT n, CAST(ts_rank(v, q) AS double precision) "
    "FROM past_statements, websearch_to_tsquery('english'::regconfig, :q) AS q WHERE v @@ q"
)


def statement_index(statements: Iterable[tuple[str, str]], engine: Engine) -> StatementIndex:
    """The index of ``statements`` by the search code of ``engine``'s database."""
    if engine.dialect.name == "sqlite":
        return Fts5Index(statements)
    return TsVectorIndex(statements, engine)
