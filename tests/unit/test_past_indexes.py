"""Past searches' statement indexes: each point built once however many search it at once, and the kept ones
bounded in number and in the characters they index."""

from __future__ import annotations

import threading

from sqlalchemy import create_engine

from services.read_api.past_indexes import PastIndexes

SQLITE = create_engine("sqlite://")  # SQLite's indexes are in-memory FTS5 tables of their own


def rows(n: int, words: str = "planning helps") -> list[dict]:
    return [{"claim_id": f"CLM-{i:04d}", "statement": f"{words} {i}"} for i in range(n)]


def test_searches_at_one_point_build_its_index_once():
    indexes = PastIndexes()
    found = []
    threads = [threading.Thread(target=lambda: found.append(indexes.at(7, SQLITE, rows(2000)))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert indexes.built == 1 and len({id(index) for index in found}) == 1


def test_kept_indexes_are_bounded_in_number_and_characters():
    indexes = PastIndexes(keep=3, max_chars=10_000)
    for seq in range(1, 6):
        indexes.at(seq, SQLITE, rows(10))
    assert len(indexes) == 3
    indexes.at(6, SQLITE, rows(400, "a much longer statement that fills the budget"))
    assert len(indexes) == 1 and indexes.kept_chars > 10_000  # the newest stays, whatever its size
    indexes.at(7, SQLITE, rows(10))
    assert len(indexes) == 1 and indexes.kept_chars < 10_000
