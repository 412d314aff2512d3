"""The past search's matching and ranking: phrases, exclusions, alternatives, stop words, BM25."""

from __future__ import annotations

from services.read_api.search_text import RULES, StatementIndex


def test_a_past_search_matches_phrases_exclusions_and_alternatives_and_ranks_by_bm25():
    index = StatementIndex(
        [("CLM-0001", "Planning, and planning again: planning helps."), ("CLM-0002", "Careful planning of tool use helps."),
         ("CLM-0003", "Tool use helps small models.")],
        RULES["postgresql"],
    )
    scores = index.scores("planned")
    assert sorted(scores, key=scores.get, reverse=True) == ["CLM-0001", "CLM-0002"]
    assert set(index.scores('"planning of tool"')) == {"CLM-0002"}  # "of" is a stop word: its place is kept
    assert set(index.scores('"planning tool"')) == set()
    assert set(index.scores("helps -planning")) == {"CLM-0003"}
    assert set(index.scores("careful or small")) == {"CLM-0002", "CLM-0003"}
    assert index.scores("the of") == {}  # stop words only: nothing to look for, as in PostgreSQL
    sqlite = StatementIndex([("CLM-0001", "The end of it.")], RULES["sqlite"])
    assert set(sqlite.scores("the of")) == {"CLM-0001"}  # SQLite's index has no stop words
