"""folded events by actor: an event id names one event of its actor on its claim

The same event id sent by two actors is two events, both folded; only the same actor's id again is a
repeat (projections/repeats.py). ``folded_events`` is keyed by the actor too. Its rows cannot be given
their actor from the table alone, so it is made again empty: the read models' projections change version
with it, and the projector rebuilds them from the log at its next start (``claimlog replay`` does the
same), which fills it.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0017'
down_revision = '0016'
branch_labels = None
depends_on = None


def _create(*key: str) -> None:
    columns = [
        sa.Column('event_id', sa.String(length=36), nullable=False),
        sa.Column('claim_id', sa.String(length=20), nullable=False),
    ]
    if 'actor_id' in key:
        columns.append(sa.Column('actor_id', sa.String(length=500), nullable=False))
    op.create_table('folded_events',
    *columns,
    sa.Column('seq', sa.BigInteger(), nullable=False),
    sa.PrimaryKeyConstraint(*key, name=op.f('pk_folded_events')),
    sqlite_with_rowid=False,
    )


def upgrade() -> None:
    op.drop_table('folded_events')
    _create('event_id', 'claim_id', 'actor_id')


def downgrade() -> None:
    op.drop_table('folded_events')
    _create('event_id', 'claim_id')
