"""parked events: a claim's poison event and its later events, held back while every other claim projects

A new, empty table. No other table changes and nothing is rebuilt.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('parked_events',
    sa.Column('seq', sa.BigInteger(), nullable=False),
    sa.Column('claim_id', sa.String(length=20), nullable=False),
    sa.Column('subject', sa.String(length=300), nullable=False),
    sa.Column('event_type', sa.String(length=40), nullable=False),
    sa.Column('reason', sa.Text(), nullable=False),
    sa.Column('parked_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('seq', name=op.f('pk_parked_events'))
    )
    op.create_index('ix_parked_events_claim_id_seq', 'parked_events', ['claim_id', 'seq'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_parked_events_claim_id_seq', table_name='parked_events')
    op.drop_table('parked_events')
