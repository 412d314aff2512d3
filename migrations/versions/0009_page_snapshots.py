"""page_snapshots: a claim's page after every SNAPSHOT_EVERY-th event, where as-of reads start folding

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'page_snapshots',
        sa.Column('claim_id', sa.String(length=20), nullable=False),
        sa.Column('seq', sa.BigInteger(), nullable=False),
        sa.Column('at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('doc', sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint('claim_id', 'seq', name=op.f('pk_page_snapshots')),
    )


def downgrade() -> None:
    op.drop_table('page_snapshots')
