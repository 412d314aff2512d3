"""drop ix_claim_pages_last_seq: ix_claim_pages_recent (last_seq, claim_id) serves every lookup it did

Every event moves its claim's last_seq, so each index on it is rewritten at every event the projector
applies; one is enough.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03
"""

from __future__ import annotations

from alembic import op

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index('ix_claim_pages_last_seq', table_name='claim_pages')


def downgrade() -> None:
    op.create_index('ix_claim_pages_last_seq', 'claim_pages', ['last_seq'], unique=False)
