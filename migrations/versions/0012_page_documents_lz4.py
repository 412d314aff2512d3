"""PostgreSQL: page documents are compressed with LZ4, not pglz

A page's document is a few kilobytes of JSON, so PostgreSQL compresses it out of line (TOAST) on every
write, with pglz by default. pglz is a large part of PostgreSQL's CPU time in a rebuild (bench/replay.py;
docs/architecture.md); LZ4 compresses and decompresses faster, at a slightly lower ratio. Only
servers built with LZ4 (the common packages are) offer it: elsewhere the columns keep the default. Documents already stored keep their compression until they are written again.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03
"""

from __future__ import annotations

from alembic import op
from sqlalchemy import text

revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None

DOCUMENTS = (("claim_pages", "doc"), ("page_snapshots", "doc"))
HAS_LZ4 = "SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'"


def upgrade() -> None:
    _compress_with("lz4")


def downgrade() -> None:
    _compress_with("pglz")


def _compress_with(method: str) -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql" or not bind.execute(text(HAS_LZ4)).scalar():
        return
    for table, column in DOCUMENTS:
        op.execute(f"ALTER TABLE {table} ALTER COLUMN {column} SET COMPRESSION {method}")
