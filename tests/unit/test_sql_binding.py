"""The projections' own binding of SQLite datetimes stores the very text SQLAlchemy's would."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import pytest
from sqlalchemy import Date, DateTime, String
from sqlalchemy.dialects import postgresql, sqlite

from projections.sql import _bind_processor

VALUES = [
    datetime(2026, 12, 4, 8, 55, 34, 123456, tzinfo=UTC),
    datetime(2026, 12, 4, 8, 55, 34, tzinfo=UTC),  # no microseconds: still six zeros
    datetime(2026, 1, 1, 0, 0, 0, 5),  # naive
    datetime(2026, 6, 30, 23, 59, 59, 999999, tzinfo=timezone(timedelta(hours=5, minutes=30))),
    datetime(999, 1, 2, 3, 4, 5, 6, tzinfo=UTC),  # a three-digit year, padded as SQLAlchemy pads it
    datetime(1, 1, 1),
    date(2026, 12, 4),
    None,
]


@pytest.mark.parametrize("value", VALUES, ids=repr)
@pytest.mark.parametrize("timezone_aware", [True, False])
def test_a_sqlite_datetime_binds_to_sqlalchemys_own_text(value, timezone_aware: bool):
    column_type = DateTime(timezone=timezone_aware)
    dialect = sqlite.dialect()
    ours, theirs = _bind_processor(column_type, dialect), column_type._cached_bind_processor(dialect)
    assert ours is not theirs  # the fast path is in use
    assert ours(value) == theirs(value)


@pytest.mark.parametrize(("column_type", "dialect"), [
    (DateTime(timezone=True), postgresql.psycopg.dialect()),
    (String(), sqlite.dialect()),
    (Date(), sqlite.dialect()),
])
def test_other_types_and_dialects_keep_their_own_binding(column_type, dialect):
    assert _bind_processor(column_type, dialect) is column_type._cached_bind_processor(dialect)
