"""The past search reads a statement into the terms the database's own search reads from it: SQLite's FTS5
table with the tokenizer of migration 0003, PostgreSQL's ``english`` tsvector."""

from __future__ import annotations

import importlib

import pytest
from sqlalchemy import Engine, text

from services.read_api.search_text import RULES, terms

SEARCH_MIGRATION = importlib.import_module("migrations.versions.0003_listing_search")
STATEMENTS = (
    "Planning before acting helps small models; the agents' studies generalize.",
    "Résumés of café_style GPT4 runs: 12 benchmarks, and again 12 of them!",
    "It is what it was: relational databases agreed with the running relations.",
    "As ÉCOLE students said, the TRAINING sets were larger than the test sets.",
)


def database_terms(engine: Engine, statement: str) -> list[tuple[int, str]]:
    """Each term the database's search index reads from the statement, with its place (from 0)."""
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            rows = conn.execute(text("SELECT lexeme, positions FROM unnest(to_tsvector('english', :s))"), {"s": statement})
            return sorted((place - 1, lexeme) for lexeme, places in rows for place in places)
        table = SEARCH_MIGRATION.SQLITE_SEARCH_TABLE.replace("claim_pages_search", "temp.statement_terms")
        conn.exec_driver_sql(table.replace("content='claim_pages', content_rowid='first_seq', ", ""))
        conn.exec_driver_sql("CREATE VIRTUAL TABLE temp.statement_vocab USING fts5vocab(temp, statement_terms, 'instance')")
        conn.execute(text("INSERT INTO temp.statement_terms(statement) VALUES (:s)"), {"s": statement})
        found = sorted((place, term) for term, place in conn.execute(text("SELECT term, offset FROM temp.statement_vocab")))
        conn.exec_driver_sql("DROP TABLE temp.statement_vocab")
        conn.exec_driver_sql("DROP TABLE temp.statement_terms")
        return found


@pytest.mark.parametrize("statement", STATEMENTS)
def test_a_statement_reads_into_the_terms_of_the_database_search(engine: Engine, statement: str):
    python = sorted((place, term) for place, term in enumerate(terms(statement, RULES[engine.dialect.name])) if term)
    assert python == database_terms(engine, statement)
