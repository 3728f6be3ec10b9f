"""A job's measured step times per shape: ``job_step_times``, one row per (job, nodes,
replicas, samples per worker), written from lease reports by the scheduler
(:class:`api.goodput_source.StepTimeRecorder`) and read each round by its goodput source.

New and empty: no job measured a shape before; a running job's next reports fill it.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "job_step_times",
        sa.Column("job_id", sa.String(64), nullable=False),
        sa.Column("nodes", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("replicas", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("atomic_bsz", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("step_s", sa.Double(), nullable=False),
        sa.Column("sync_s", sa.Double(), nullable=False),
        sa.Column("reports", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["jobs.id"],
            name=op.f("fk_job_step_times_job_id_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "job_id", "nodes", "replicas", "atomic_bsz", name=op.f("pk_job_step_times")
        ),
    )


def downgrade() -> None:
    op.drop_table("job_step_times")
