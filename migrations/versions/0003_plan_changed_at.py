"""When a job's plan last changed: ``jobs.plan_changed_at``, set by the scheduling cycle when
it applies a re-plan the executor accepted (policies read it to space re-plans apart).

Nullable, and null for every existing row: no stored job has a recorded re-plan time (the
policies kept it in memory until now), which reads as "never re-planned".

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("plan_changed_at", sa.Double(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("plan_changed_at")
