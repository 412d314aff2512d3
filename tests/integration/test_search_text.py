"""The past search is the database's own search: on SQLite an in-memory FTS5 table of the present table's
tokenizer, on PostgreSQL the server's ``english`` tsvectors and ``ts_rank``; each finds and ranks what the
present search over the same statements finds and ranks (services/read_api/search_text.py)."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine

from services.log import ClaimLog
from services.read_api.listing_sql import ClaimFilters, claim_listing
from services.read_api.search_text import statement_index
from tests.builders import drafted
from tests.conftest import random_claim_id
from tests.integration.test_projector import project_all

STATEMENTS = (
    "Planning before acting helps small models; the agents' studies generalize.",
    "Résumés of café_style GPT4 runs: 12 benchmarks, and again 12 of them!",
    "It is what it was: relational databases agreed with the running relations.",
    "As ÉCOLE students said, the TRAINING sets were larger than the test sets, and planning helps.",
    "Planning, planning and planning again: state-of-the-art planning helps agents.",
)
QUERIES = ("planning", "helps -agents", '"the test sets"', "relation or cafe", "ecole", "state-of-the-art", "12", "the of")


async def test_a_past_search_finds_and_ranks_what_the_present_search_does(claim_log: ClaimLog, engine: Engine):
    statements = [(random_claim_id(), statement) for statement in STATEMENTS]
    for claim_id, statement in statements:  # the present tables and their search index, as the projector fills them
        await claim_log.append(claim_id, [drafted(claim_id, statement=statement)], expected_seq=0, prev_hash=None)
    await project_all(claim_log, engine)
    index = statement_index(statements, engine)
    for q in QUERIES:
        past = index.scores(q)
        with engine.connect() as conn:
            present = {row["claim_id"]: row["sort_key"] for row in claim_listing(conn, ClaimFilters(q=q), sort="relevance", after=None, limit=50)}
        assert past.keys() == present.keys(), q
        assert past == pytest.approx(present), q  # the same relevance: bm25() on SQLite, ts_rank on PostgreSQL
    assert index.scores("planning")
    if engine.dialect.name == "postgresql":
        assert index.scores("the of") == {}  # stop words only: nothing to look for, as in the present search
