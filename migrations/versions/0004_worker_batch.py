"""An elastic job's current per-worker batch: ``jobs.worker_batch``, set by the scheduling
cycle when a start or a resize gives the gang a batch other than the spec's.

Nullable, and null for every existing row: no job was resized before, and null reads as "the
spec's ``batch_size``".

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("worker_batch", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("worker_batch")
