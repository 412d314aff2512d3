"""The past search on SQLite's rules: an in-memory FTS5 table of the present search's tokenizer, matching
phrases, exclusions and alternatives and ranking by its bm25()."""

from __future__ import annotations

import importlib

from services.read_api.search_text import FTS5_TABLE, Fts5Index, fts5_query

SEARCH_MIGRATION = importlib.import_module("migrations.versions.0003_listing_search")


def test_the_past_index_is_made_as_the_present_search_table_is():
    present = SEARCH_MIGRATION.SQLITE_SEARCH_TABLE.replace("content='claim_pages', content_rowid='first_seq', ", "")
    assert present == FTS5_TABLE


def test_a_past_search_matches_phrases_exclusions_and_alternatives_and_ranks_by_bm25():
    index = Fts5Index(
        [("CLM-0001", "Planning, and planning again: planning helps."), ("CLM-0002", "Careful planning of tool use helps."),
         ("CLM-0003", "Tool use helps small models."), ("CLM-0004", "Résumés of café studies.")],
    )
    scores = index.scores("planned")
    assert sorted(scores, key=scores.get, reverse=True) == ["CLM-0001", "CLM-0002"]
    assert set(index.scores('"planning of tool"')) == {"CLM-0002"}
    assert set(index.scores('"planning tool"')) == set()
    assert set(index.scores("helps -planning")) == {"CLM-0003"}
    assert set(index.scores("careful or small")) == {"CLM-0002", "CLM-0003"}
    assert set(index.scores("cafe resume")) == {"CLM-0004"}  # diacritics removed, stemmed
    assert set(index.scores("of")) == {"CLM-0002", "CLM-0004"}  # SQLite's index has no stop words
    assert index.scores("-") == {} and fts5_query("-") is None
