"""standing, scorecard eligibility and every relation's count on claim pages

The read models are emptied and their checkpoints dropped, so the projector rebuilds them from the
log with the new columns filled in (they are disposable: the log is the source of truth).

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None

NEW_COUNTS = ('sources_validating', 'sources_supporting', 'sources_qualifying', 'sources_mentioning')


def _rebuild_from_the_log() -> None:
    op.execute('DELETE FROM claim_pages')
    op.execute('DELETE FROM unreadable_events')
    op.execute('DELETE FROM projection_checkpoints')


def upgrade() -> None:
    _rebuild_from_the_log()
    with op.batch_alter_table('claim_pages', schema=None) as batch_op:
        batch_op.add_column(sa.Column('unreviewed_model_draft', sa.Boolean(), nullable=False))
        batch_op.add_column(sa.Column('standing', sa.String(length=12), nullable=False))
        for name in NEW_COUNTS:
            batch_op.add_column(sa.Column(name, sa.Integer(), nullable=False))
        batch_op.create_index('ix_claim_pages_scorecard', ['capability', 'counts_toward_scorecard', 'standing'], unique=False)


def downgrade() -> None:
    _rebuild_from_the_log()
    with op.batch_alter_table('claim_pages', schema=None) as batch_op:
        batch_op.drop_index('ix_claim_pages_scorecard')
        for name in reversed(NEW_COUNTS):
            batch_op.drop_column(name)
        batch_op.drop_column('standing')
        batch_op.drop_column('unreviewed_model_draft')
