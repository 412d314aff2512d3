"""read-model generations: which set of tables the API serves, so a replay can build a new set and switch

The existing tables become generation 0, active. Nothing is rebuilt.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('read_model_generations',
    sa.Column('generation', sa.Integer(), nullable=False),
    sa.Column('state', sa.String(length=12), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('switched_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('generation', name=op.f('pk_read_model_generations'))
    )
    op.execute(
        "INSERT INTO read_model_generations (generation, state, created_at) VALUES (0, 'active', CURRENT_TIMESTAMP)"
    )


def downgrade() -> None:
    op.drop_table('read_model_generations')
