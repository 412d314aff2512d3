"""SQLite: a new claim's statement enters the search index with the page's insert, not by a trigger

An AFTER INSERT trigger writing to the FTS5 table runs as a statement of its own for every row, and
FTS5 flushes its pending terms to disk at each, which made the trigger about half of a new page's
cost; the projection inserts the batch's new statements into the index itself, in the same
transaction (projections/claim_pages.py; the measurement is in docs/architecture.md). The update and delete triggers stay:
statements change rarely, and deletes happen only when a generation's tables are emptied. A later migration that makes SQLite
recreate claim_pages must create this module's ``SQLITE_TRIGGERS`` again, not 0003's.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03
"""

from __future__ import annotations

import importlib

from alembic import op

revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None

_SEARCH = importlib.import_module("migrations.versions.0003_listing_search")
INSERT_TRIGGER = "claim_pages_search_insert"
# The search triggers in force on SQLite from this revision on (bulk_build.py restores these).
SQLITE_TRIGGERS = tuple(t for t in _SEARCH.SQLITE_TRIGGERS if f"TRIGGER {INSERT_TRIGGER} " not in t)


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute(f"DROP TRIGGER IF EXISTS {INSERT_TRIGGER}")


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute(next(t for t in _SEARCH.SQLITE_TRIGGERS if f"TRIGGER {INSERT_TRIGGER} " in t))
