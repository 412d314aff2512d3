"""a checkpoint per share of the claims: the projector can run as several processes

``CLAIMLOG_PROJECTOR_SHARES=n`` runs the projector as n processes, each folding the claims of one share
(services/projector/shares.py), each committing its own checkpoint. A row is now one projection's
position in one share; ``shares`` says how many shares the rows were written for, so a projector
started with another number notices and re-divides them (``Projector.load_checkpoint``). Existing
rows are share 0 of 1: the single projector's, as before.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0013'
down_revision = '0012'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('projection_checkpoints') as batch:
        batch.add_column(sa.Column('share', sa.Integer(), server_default='0', nullable=False))
        batch.add_column(sa.Column('shares', sa.Integer(), server_default='1', nullable=False))
        batch.drop_constraint('pk_projection_checkpoints', type_='primary')
        batch.create_primary_key('pk_projection_checkpoints', ['name', 'share'])


def downgrade() -> None:
    # One row per projection can say where shares that stand apart are only by folding some events twice.
    apart = op.get_bind().execute(
        sa.text('SELECT name FROM projection_checkpoints GROUP BY name HAVING MIN(last_seq) <> MAX(last_seq)')
    ).scalars().all()
    if apart:
        raise RuntimeError(
            f"the projector's shares stand at different positions for {sorted(apart)}: run `claimlog projector` with "
            "CLAIMLOG_PROJECTOR_SHARES=1 until it has caught up, then downgrade"
        )
    op.execute('DELETE FROM projection_checkpoints WHERE share > 0')
    with op.batch_alter_table('projection_checkpoints') as batch:
        batch.drop_constraint('pk_projection_checkpoints', type_='primary')
        batch.create_primary_key('pk_projection_checkpoints', ['name'])
        batch.drop_column('shares')
        batch.drop_column('share')
