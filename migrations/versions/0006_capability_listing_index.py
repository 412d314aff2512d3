"""a capability's listing in id order reads its first page off one index instead of sorting the capability

With 100,000 claims, `GET /claims?capability=...` sorted every claim of the capability for each page
(the slowest read of bench/read_api.py on SQLite). The composite index serves the equality and the
order; it also serves every lookup the single-column index did.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03
"""

from __future__ import annotations

from alembic import op

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index('ix_claim_pages_capability_id', 'claim_pages', ['capability', 'claim_id'], unique=False)
    op.drop_index('ix_claim_pages_capability', table_name='claim_pages')


def downgrade() -> None:
    op.create_index('ix_claim_pages_capability', 'claim_pages', ['capability'], unique=False)
    op.drop_index('ix_claim_pages_capability_id', table_name='claim_pages')
