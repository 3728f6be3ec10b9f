"""Initial schema: jobs and their events, allocations, nodes, progress, logs, tokens,
idempotency keys, the scheduler's leader row and utilization samples.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copy of JobState at this revision: a migration must not change when the code does.
# tests/api/test_migrations.py checks the database accepts exactly today's JobState values.
JOB_STATES = (
    "PENDING",
    "ADMITTED",
    "RUNNING",
    "PREEMPTED",
    "RETRYING",
    "SUCCEEDED",
    "FAILED",
    "CANCELLED",
)


def serial_id() -> sa.Column[int]:
    return sa.Column(
        "id",
        sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
        autoincrement=True,
        nullable=False,
    )


def job_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["job_id"], ["jobs.id"], name=op.f(f"fk_{table}_job_id_jobs"), ondelete="CASCADE"
    )


def upgrade() -> None:
    states = ", ".join(f"'{state}'" for state in JOB_STATES)
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("username", sa.String(128), nullable=False),
        sa.Column("queue", sa.String(128), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("iterations", sa.BigInteger(), nullable=False),
        sa.Column("iterations_done", sa.Double(), nullable=False),
        sa.Column("plan", sa.JSON(), nullable=False),
        sa.Column("placement", sa.JSON(), nullable=False),
        sa.Column("submitted_at", sa.Double(), nullable=False),
        sa.Column("started_at", sa.Double(), nullable=True),
        sa.Column("run_started_at", sa.Double(), nullable=True),
        sa.Column("finished_at", sa.Double(), nullable=True),
        sa.Column("attained_gpu_seconds", sa.Double(), nullable=False),
        sa.Column("preemptions", sa.Integer(), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("extra", sa.JSON(), nullable=False),
        sa.Column("epoch", sa.BigInteger(), nullable=True),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.CheckConstraint(f"state IN ({states})", name=op.f("ck_jobs_state_valid")),
        sa.CheckConstraint("version >= 0", name=op.f("ck_jobs_version_nonnegative")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
    )
    op.create_index("ix_jobs_state_submitted", "jobs", ["state", "submitted_at"])
    op.create_index("ix_jobs_submitted_id", "jobs", ["submitted_at", "id"])
    op.create_index("ix_jobs_username_submitted", "jobs", ["username", "submitted_at"])

    op.create_table(
        "job_events",
        serial_id(),
        sa.Column("job_id", sa.String(64), nullable=False),
        sa.Column("from_state", sa.String(16), nullable=True),
        sa.Column("to_state", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("at", sa.Double(), nullable=False),
        sa.Column("actor", sa.String(128), nullable=False),
        sa.Column("epoch", sa.BigInteger(), nullable=True),
        job_fk("job_events"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_events")),
    )
    op.create_index("ix_job_events_job_id_id", "job_events", ["job_id", "id"])

    op.create_table(
        "allocations",
        sa.Column("job_id", sa.String(64), nullable=False),
        sa.Column("rank", sa.Integer(), nullable=False),
        sa.Column("node", sa.Integer(), nullable=False),
        sa.Column("gpu", sa.Integer(), nullable=False),
        job_fk("allocations"),
        sa.PrimaryKeyConstraint("job_id", "rank", name=op.f("pk_allocations")),
    )
    op.create_index("ix_allocations_node_gpu", "allocations", ["node", "gpu"])

    op.create_table(
        "nodes",
        sa.Column("index", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("num_gpus", sa.Integer(), nullable=False),
        sa.Column("gpu_type", sa.String(64), nullable=False),
        sa.Column("gpu_memory_bytes", sa.BigInteger(), nullable=False),
        sa.Column("alive", sa.Boolean(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("index", name=op.f("pk_nodes")),
    )

    op.create_table(
        "progress_samples",
        serial_id(),
        sa.Column("job_id", sa.String(64), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("iteration", sa.Double(), nullable=False),
        sa.Column("at", sa.Double(), nullable=False),
        sa.Column("loss", sa.Double(), nullable=True),
        sa.Column("throughput", sa.Double(), nullable=True),
        sa.Column("plan", sa.JSON(), nullable=False),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.Column("lease_boundary", sa.Boolean(), nullable=False),
        job_fk("progress_samples"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_progress_samples")),
    )
    op.create_index(
        "ix_progress_samples_job_iteration", "progress_samples", ["job_id", "iteration"]
    )

    op.create_table(
        "job_log_lines",
        serial_id(),
        sa.Column("job_id", sa.String(64), nullable=False),
        sa.Column("at", sa.Double(), nullable=False),
        sa.Column("line", sa.Text(), nullable=False),
        job_fk("job_log_lines"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_log_lines")),
    )
    op.create_index("ix_job_log_lines_job_id_id", "job_log_lines", ["job_id", "id"])

    op.create_table(
        "api_tokens",
        serial_id(),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("username", sa.String(128), nullable=False),
        sa.Column("scopes", sa.JSON(), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("revoked_at", sa.Double(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_tokens")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_api_tokens_token_hash")),
    )

    op.create_table(
        "idempotency_keys",
        serial_id(),
        sa.Column("username", sa.String(128), nullable=False),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("request_hash", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("response_status", sa.Integer(), nullable=True),
        sa.Column("response_body", sa.Text(), nullable=True),
        sa.Column("job_id", sa.String(64), nullable=True),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.CheckConstraint(
            "status IN ('in_flight', 'done')", name=op.f("ck_idempotency_keys_status_valid")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_idempotency_keys")),
        sa.UniqueConstraint("username", "key", name=op.f("uq_idempotency_keys_username_key")),
    )
    op.create_index("ix_idempotency_keys_created_at", "idempotency_keys", ["created_at"])

    leader = op.create_table(
        "scheduler_leader",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        sa.Column("holder", sa.String(255), nullable=True),
        sa.Column("acquired_at", sa.Double(), nullable=True),
        sa.Column("heartbeat_at", sa.Double(), nullable=True),
        sa.Column("policy", sa.String(64), nullable=True),
        sa.Column("round", sa.BigInteger(), nullable=False),
        sa.Column("last_round_at", sa.Double(), nullable=True),
        sa.Column("last_round_latency_s", sa.Double(), nullable=True),
        sa.Column("last_decisions", sa.JSON(), nullable=False),
        sa.CheckConstraint("id = 1", name=op.f("ck_scheduler_leader_single_row")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_scheduler_leader")),
    )
    # The one row exists from the start, so the epoch guard's sub-select always finds it.
    op.bulk_insert(leader, [{"id": 1, "epoch": 0, "round": 0, "last_decisions": []}])

    op.create_table(
        "utilization_samples",
        serial_id(),
        sa.Column("at", sa.Double(), nullable=False),
        sa.Column("busy_gpus", sa.Integer(), nullable=False),
        sa.Column("total_gpus", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_utilization_samples")),
    )
    op.create_index("ix_utilization_samples_at", "utilization_samples", ["at"])


def downgrade() -> None:
    for table in (
        "utilization_samples",
        "scheduler_leader",
        "idempotency_keys",
        "api_tokens",
        "job_log_lines",
        "progress_samples",
        "nodes",
        "allocations",
        "job_events",
        "jobs",
    ):
        op.drop_table(table)
