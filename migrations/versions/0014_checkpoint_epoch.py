"""a checkpoint carries the epoch of the worker that owns its partition: a stale owner is fenced off

A checkpoint row is one projection's position in one partition of the claims. Workers that divide the
partitions among themselves hold each by a lease whose revision is the owner's epoch; the writer
(services/projector/writer.py) raises the row's epoch when a worker takes the partition and refuses a
commit whose epoch is lower than the row's, so that a worker paused past its lease cannot write over
its successor. Existing rows are at epoch 0: the single projector's, which owns every partition.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0014'
down_revision = '0013'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('projection_checkpoints') as batch:
        batch.add_column(sa.Column('epoch', sa.BigInteger(), server_default='0', nullable=False))


def downgrade() -> None:
    with op.batch_alter_table('projection_checkpoints') as batch:
        batch.drop_column('epoch')
