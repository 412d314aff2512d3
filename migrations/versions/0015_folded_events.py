"""folded events: the event ids each claim has folded, so that a repeat of one is never folded again

JetStream drops a repeated ``Nats-Msg-Id`` only within its duplicate window; an event stored again
after it (or under another message id) is recorded as unreadable instead of being folded twice
(projections/repeats.py). A new table, filled from the log: the read models are rebuilt with
``claimlog replay`` to fill it for the events already folded, as for a projection's new version.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0015'
down_revision = '0014'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('folded_events',
    sa.Column('event_id', sa.String(length=36), nullable=False),
    sa.Column('claim_id', sa.String(length=20), nullable=False),
    sa.Column('seq', sa.BigInteger(), nullable=False),
    sa.PrimaryKeyConstraint('event_id', 'claim_id', name=op.f('pk_folded_events')),
    sqlite_with_rowid=False,
    )


def downgrade() -> None:
    op.drop_table('folded_events')
