"""Rows handed to the database as tuples in column order are stored exactly as SQLAlchemy stores the same rows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from sqlalchemy import Engine

from projections.base import Record
from projections.contributors import activity_row
from projections.sql import append_values, column_names, insert_new_values
from projections.tables import contributor_activity
from tests.builders import MODEL, PERSON, attached, reviewed
from tests.conftest import random_claim_id

# The order ``activity_row`` gives its values in: the table's own.
ACTIVITY_COLUMNS = ("seq", "actor_id", "actor_kind", "actor_model", "claim_id", "event_type", "subject_id", "at")


def activity(start: int) -> list[tuple]:
    """Activity lines with every kind of value: nulls, a model's name, times with and without microseconds."""
    claim = random_claim_id()
    events = [attached(claim, actor=PERSON), reviewed(claim, kind="ai", actor=MODEL)]
    times = [datetime(2026, 12, 4, 9, 0, 0, tzinfo=UTC), datetime(2026, 12, 4, 10, 30, 0, 5, tzinfo=timezone(timedelta(hours=2)))]
    return [activity_row(Record(start + i, times[i], event)) for i, event in enumerate(events)]


def stored(engine: Engine) -> list[tuple]:
    """The rows as the driver returns them (SQLite's times as the stored text, not parsed back)."""
    with engine.connect() as conn:
        return [tuple(row) for row in conn.exec_driver_sql(f"SELECT {', '.join(ACTIVITY_COLUMNS)} FROM contributor_activity ORDER BY seq")]


def test_an_activity_line_gives_the_tables_columns_in_order():
    assert column_names(contributor_activity) == ACTIVITY_COLUMNS
    (line, _) = activity(1)
    assert line[ACTIVITY_COLUMNS.index("actor_kind")] == "person"
    assert type(line[ACTIVITY_COLUMNS.index("actor_kind")]) is str  # the text, not the enum (psycopg dumps an enum's name)


def test_rows_as_tuples_are_stored_as_sqlalchemy_stores_them(engine: Engine):
    as_tuples, as_dicts = activity(1) + activity(10), activity(20) + activity(30)
    with engine.begin() as conn:
        insert_new_values(conn, contributor_activity, as_tuples[:2])
        append_values(conn, contributor_activity, as_tuples[2:])
        # SQLAlchemy's own insert, with its own parameter handling, is what the values must match.
        conn.execute(contributor_activity.insert(), [dict(zip(ACTIVITY_COLUMNS, row, strict=True)) for row in as_dicts])
    rows = stored(engine)
    assert len(rows) == 8
    by_tuples, by_dicts = rows[:4], rows[4:]
    seq, claim = ACTIVITY_COLUMNS.index("seq"), ACTIVITY_COLUMNS.index("claim_id")
    strip = lambda row: tuple(v for i, v in enumerate(row) if i not in (seq, claim))  # noqa: E731 - the rest must match
    assert [strip(r) for r in by_tuples] == [strip(r) for r in by_dicts]
    assert by_tuples[1][ACTIVITY_COLUMNS.index("actor_model")] == MODEL.model
    assert by_tuples[0][ACTIVITY_COLUMNS.index("subject_id")] == "s1"


def test_a_tuple_row_already_there_is_skipped(engine: Engine):
    rows = activity(1)
    with engine.begin() as conn:
        insert_new_values(conn, contributor_activity, rows)
        insert_new_values(conn, contributor_activity, rows)
    assert len(stored(engine)) == 2
