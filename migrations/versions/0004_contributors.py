"""the contributors projection: activity per actor, sources and disagreements by who brought them

A new projection starts with the others from the first event: the read models are emptied and their
checkpoints dropped, so the projector rebuilds all of them from the log.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def _rebuild_from_the_log() -> None:
    op.execute('DELETE FROM claim_pages')
    op.execute('DELETE FROM unreadable_events')
    op.execute('DELETE FROM projection_checkpoints')


def upgrade() -> None:
    _rebuild_from_the_log()
    op.create_table('contributor_activity',
    sa.Column('seq', sa.BigInteger(), nullable=False),
    sa.Column('actor_id', sa.String(length=500), nullable=False),
    sa.Column('actor_kind', sa.String(length=12), nullable=False),
    sa.Column('actor_model', sa.String(length=500), nullable=True),
    sa.Column('claim_id', sa.String(length=20), nullable=False),
    sa.Column('event_type', sa.String(length=40), nullable=False),
    sa.Column('subject_id', sa.String(length=64), nullable=True),
    sa.Column('at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('seq', name=op.f('pk_contributor_activity'))
    )
    op.create_index('ix_contributor_activity_actor', 'contributor_activity', ['actor_id', 'seq'], unique=False)
    op.create_table('contributor_disagreements',
    sa.Column('claim_id', sa.String(length=20), nullable=False),
    sa.Column('disagreement_id', sa.String(length=64), nullable=False),
    sa.Column('filed_by', sa.String(length=500), nullable=False),
    sa.Column('outcome', sa.String(length=12), nullable=True),
    sa.PrimaryKeyConstraint('claim_id', 'disagreement_id', name=op.f('pk_contributor_disagreements'))
    )
    op.create_index(op.f('ix_contributor_disagreements_filed_by'), 'contributor_disagreements', ['filed_by'], unique=False)
    op.create_table('contributor_sources',
    sa.Column('claim_id', sa.String(length=20), nullable=False),
    sa.Column('source_id', sa.String(length=64), nullable=False),
    sa.Column('brought_by', sa.String(length=500), nullable=False),
    sa.Column('relation', sa.String(length=12), nullable=False),
    sa.Column('withdrawn', sa.Boolean(), nullable=False),
    sa.Column('corrections', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('claim_id', 'source_id', name=op.f('pk_contributor_sources'))
    )
    op.create_index(op.f('ix_contributor_sources_brought_by'), 'contributor_sources', ['brought_by'], unique=False)


def downgrade() -> None:
    _rebuild_from_the_log()
    op.drop_index(op.f('ix_contributor_sources_brought_by'), table_name='contributor_sources')
    op.drop_table('contributor_sources')
    op.drop_index(op.f('ix_contributor_disagreements_filed_by'), table_name='contributor_disagreements')
    op.drop_table('contributor_disagreements')
    op.drop_index('ix_contributor_activity_actor', table_name='contributor_activity')
    op.drop_table('contributor_activity')
