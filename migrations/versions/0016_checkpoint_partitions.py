"""checkpoint columns named for what they hold: the log partition a row is the position of, and how many

A checkpoint row is one projection's position in one partition of the log (0 of 1: the whole log, for a
projector or a rebuild that folds every partition), fenced by its owner's epoch. The columns that said so
were named ``share`` and ``shares``, after a client-side division of the claims that is gone: the server's
partitions are the one division. The rows are kept as they are, renamed.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-07
"""

from __future__ import annotations

from alembic import op

revision = '0016'
down_revision = '0015'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('projection_checkpoints') as batch:
        batch.alter_column('share', new_column_name='partition')
        batch.alter_column('shares', new_column_name='partitions')


def downgrade() -> None:
    with op.batch_alter_table('projection_checkpoints') as batch:
        batch.alter_column('partition', new_column_name='share')
        batch.alter_column('partitions', new_column_name='shares')
