"""The optimizer a job trains with: ``jobs.optimizer``, ``sgd`` or ``adamw`` (the spec's
``optimizer``, which the ``spec`` JSON carries too; the column is there to query by).

Every existing row becomes ``sgd``, which is what every job trained with before the field
existed, and what their stored specs (without the key) read as. The database refuses any
other value; the list is frozen here, as the state check of 0001 is.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OPTIMIZERS = "'sgd', 'adamw'"


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(
            sa.Column("optimizer", sa.String(16), nullable=False, server_default="sgd")
        )
        batch.create_check_constraint(
            op.f("ck_jobs_optimizer_valid"), f"optimizer IN ({OPTIMIZERS})"
        )


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_constraint(op.f("ck_jobs_optimizer_valid"), type_="check")
        batch.drop_column("optimizer")
