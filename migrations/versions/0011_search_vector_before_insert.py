"""PostgreSQL: a new page's search vector is computed as the row is inserted, not by an update after it

0003's AFTER INSERT trigger updated the row it had just inserted, so every new page was written twice;
a rebuild, which dropped the trigger, then updated every page at the end (to_tsvector is the
smaller part of that; the rest is the second copy of the row). A BEFORE INSERT trigger
sets the vector on the row being inserted. 0003 avoided BEFORE INSERT because an upsert's proposed
row fires it even when the upsert turns into an update, computing a vector nobody keeps; the live
projection no longer upserts pages (it inserts new ones and updates the others), and a rebuild
worker upserts a page only when it comes back after being written.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-03
"""

from __future__ import annotations

import importlib

from alembic import op

revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None

_SEARCH = importlib.import_module("migrations.versions.0003_listing_search")
INSERT_TRIGGER = "claim_pages_search_insert"
BEFORE_INSERT = f"""CREATE TRIGGER {INSERT_TRIGGER} BEFORE INSERT ON claim_pages
    FOR EACH ROW EXECUTE FUNCTION claim_pages_search_changed()"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"DROP TRIGGER IF EXISTS {INSERT_TRIGGER} ON claim_pages")
        op.execute(BEFORE_INSERT)
        op.execute("DROP FUNCTION IF EXISTS claim_pages_search_inserted()")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"DROP TRIGGER IF EXISTS {INSERT_TRIGGER} ON claim_pages")
        for statement in _SEARCH.POSTGRESQL_SEARCH:
            if "claim_pages_search_inserted" in statement:
                op.execute(statement)
