"""claim pages, checkpoints and unreadable events

Revision ID: 0001
Revises: 
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('claim_pages',
    sa.Column('claim_id', sa.String(length=20), nullable=False),
    sa.Column('slug', sa.String(length=200), nullable=False),
    sa.Column('statement', sa.Text(), nullable=False),
    sa.Column('statement_key', sa.String(length=32), nullable=False),
    sa.Column('capability', sa.String(length=500), nullable=False),
    sa.Column('technique', sa.String(length=500), nullable=True),
    sa.Column('lifecycle', sa.String(length=12), nullable=False),
    sa.Column('review_state', sa.String(length=24), nullable=False),
    sa.Column('revision', sa.Integer(), nullable=False),
    sa.Column('counts_toward_scorecard', sa.Boolean(), nullable=False),
    sa.Column('sources_active', sa.Integer(), nullable=False),
    sa.Column('sources_withdrawn', sa.Integer(), nullable=False),
    sa.Column('sources_contradicting', sa.Integer(), nullable=False),
    sa.Column('disagreements_open', sa.Integer(), nullable=False),
    sa.Column('disagreements_resolved', sa.Integer(), nullable=False),
    sa.Column('reviews_person', sa.Integer(), nullable=False),
    sa.Column('reviews_ai', sa.Integer(), nullable=False),
    sa.Column('first_seq', sa.BigInteger(), nullable=False),
    sa.Column('last_seq', sa.BigInteger(), nullable=False),
    sa.Column('doc', sa.Text(), nullable=False),
    sa.PrimaryKeyConstraint('claim_id', name=op.f('pk_claim_pages'))
    )
    with op.batch_alter_table('claim_pages', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_claim_pages_capability'), ['capability'], unique=False)
        batch_op.create_index(batch_op.f('ix_claim_pages_last_seq'), ['last_seq'], unique=False)
        batch_op.create_index(batch_op.f('ix_claim_pages_slug'), ['slug'], unique=False)
        batch_op.create_index(batch_op.f('ix_claim_pages_statement_key'), ['statement_key'], unique=False)

    op.create_table('projection_checkpoints',
    sa.Column('name', sa.String(length=64), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('last_seq', sa.BigInteger(), nullable=False),
    sa.PrimaryKeyConstraint('name', name=op.f('pk_projection_checkpoints'))
    )
    op.create_table('unreadable_events',
    sa.Column('seq', sa.BigInteger(), nullable=False),
    sa.Column('subject', sa.String(length=300), nullable=False),
    sa.Column('reason', sa.Text(), nullable=False),
    sa.PrimaryKeyConstraint('seq', name=op.f('pk_unreadable_events'))
    )


def downgrade() -> None:
    op.drop_table('unreadable_events')
    op.drop_table('projection_checkpoints')
    with op.batch_alter_table('claim_pages', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_claim_pages_statement_key'))
        batch_op.drop_index(batch_op.f('ix_claim_pages_slug'))
        batch_op.drop_index(batch_op.f('ix_claim_pages_last_seq'))
        batch_op.drop_index(batch_op.f('ix_claim_pages_capability'))

    op.drop_table('claim_pages')
