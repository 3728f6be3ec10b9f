"""The relational schema. Alembic migrations (``migrations/``) must produce exactly this;
``tests/api/test_migrations.py`` diffs them.

Times are UNIX seconds in double precision, as in the core's domain objects, so a job
round-trips through the store bit for bit. The API renders them as ISO-8601 UTC.
"""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    Double,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from jigsaw.model.lifecycle import JobState
from jigsaw.model.spec_checks import OPTIMIZERS

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# SQLite only auto-increments an INTEGER PRIMARY KEY; Postgres gets a 64-bit identity.
SerialId = BigInteger().with_variant(Integer(), "sqlite")

STATE_VALUES = ", ".join(f"'{state.value}'" for state in JobState)
IDEMPOTENCY_STATUSES = ("in_flight", "done")
OPTIMIZER_VALUES = ", ".join(f"'{name}'" for name in OPTIMIZERS)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}  # noqa: RUF012


class JobRow(Base):
    __tablename__ = "jobs"
    __table_args__ = (
        # Illegal states are refused by the database too, not only by the domain code.
        CheckConstraint(f"state IN ({STATE_VALUES})", name="state_valid"),
        CheckConstraint("version >= 0", name="version_nonnegative"),
        CheckConstraint(f"optimizer IN ({OPTIMIZER_VALUES})", name="optimizer_valid"),
        Index("ix_jobs_state_submitted", "state", "submitted_at"),
        Index("ix_jobs_username_submitted", "username", "submitted_at"),
        Index("ix_jobs_submitted_id", "submitted_at", "id"),
    )

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(128))
    username: Mapped[str] = mapped_column(String(128))
    queue: Mapped[str] = mapped_column(String(128))
    state: Mapped[str] = mapped_column(String(16))
    priority: Mapped[int] = mapped_column(Integer)
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    version: Mapped[int] = mapped_column(Integer)
    attempt: Mapped[int] = mapped_column(Integer)
    iterations: Mapped[int] = mapped_column(BigInteger)
    iterations_done: Mapped[float] = mapped_column(Double)
    plan: Mapped[dict[str, Any]] = mapped_column(JSON)
    """The resolved plan, :func:`jigsaw.model.plan.plan_to_json` (JSON ``null`` before a start)."""
    placement: Mapped[list[Any]] = mapped_column(JSON)
    submitted_at: Mapped[float] = mapped_column(Double)
    started_at: Mapped[float | None] = mapped_column(Double)
    run_started_at: Mapped[float | None] = mapped_column(Double)
    finished_at: Mapped[float | None] = mapped_column(Double)
    attained_gpu_seconds: Mapped[float] = mapped_column(Double)
    preemptions: Mapped[int] = mapped_column(Integer)
    failures: Mapped[int] = mapped_column(Integer)
    reason: Mapped[str] = mapped_column(Text)
    plan_changed_at: Mapped[float | None] = mapped_column(Double)
    """When the scheduling cycle last applied a re-plan (``None``: never, or before 0003)."""
    worker_batch: Mapped[int | None] = mapped_column(Integer)
    """Per-worker batch of the current run, as the last start or resize set it (``None``: the
    spec's ``batch_size``; every row before 0004)."""
    optimizer: Mapped[str] = mapped_column(String(16), server_default="sgd")
    """The spec's ``optimizer``, as a column to query by (``sgd`` for every row before 0005,
    whose specs predate the field and read as ``sgd``)."""
    extra: Mapped[dict[str, Any]] = mapped_column(JSON)
    epoch: Mapped[int | None] = mapped_column(BigInteger)
    """Epoch of the scheduler that last wrote this row (``None``: written by the API)."""
    updated_at: Mapped[float] = mapped_column(Double)


class JobEventRow(Base):
    __tablename__ = "job_events"
    __table_args__ = (Index("ix_job_events_job_id_id", "job_id", "id"),)

    id: Mapped[int] = mapped_column(SerialId, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(String(64), ForeignKey("jobs.id", ondelete="CASCADE"))
    from_state: Mapped[str | None] = mapped_column(String(16))
    to_state: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(Text)
    at: Mapped[float] = mapped_column(Double)
    actor: Mapped[str] = mapped_column(String(128))
    epoch: Mapped[int | None] = mapped_column(BigInteger)
    code: Mapped[str] = mapped_column(String(64), server_default="")
    """``Type/Reason`` (:class:`jigsaw.model.reasons.ReasonCode`); empty for events before 0002."""


class AllocationRow(Base):
    """One worker of a job on one GPU (the normalized form of ``jobs.placement``)."""

    __tablename__ = "allocations"
    __table_args__ = (Index("ix_allocations_node_gpu", "node", "gpu"),)

    job_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True
    )
    rank: Mapped[int] = mapped_column(Integer, primary_key=True)
    node: Mapped[int] = mapped_column(Integer)
    gpu: Mapped[int] = mapped_column(Integer)


class NodeRow(Base):
    __tablename__ = "nodes"

    index: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    name: Mapped[str] = mapped_column(String(128))
    num_gpus: Mapped[int] = mapped_column(Integer)
    gpu_type: Mapped[str] = mapped_column(String(64))
    gpu_memory_bytes: Mapped[int] = mapped_column(BigInteger)
    alive: Mapped[bool] = mapped_column(Boolean)
    updated_at: Mapped[float] = mapped_column(Double)


class ProgressSampleRow(Base):
    __tablename__ = "progress_samples"
    __table_args__ = (Index("ix_progress_samples_job_iteration", "job_id", "iteration"),)

    id: Mapped[int] = mapped_column(SerialId, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(String(64), ForeignKey("jobs.id", ondelete="CASCADE"))
    attempt: Mapped[int] = mapped_column(Integer)
    iteration: Mapped[float] = mapped_column(Double)
    at: Mapped[float] = mapped_column(Double)
    loss: Mapped[float | None] = mapped_column(Double)
    throughput: Mapped[float | None] = mapped_column(Double)
    plan: Mapped[list[Any]] = mapped_column(JSON)
    metrics: Mapped[dict[str, Any]] = mapped_column(JSON)
    lease_boundary: Mapped[bool] = mapped_column(Boolean)
    """Kept when a job's samples are thinned to the per-job cap."""


class JobStepTimeRow(Base):
    """A job's measured seconds per iteration at one shape, from its lease reports: what the
    service's goodput source fits its step-time model to (:mod:`api.goodput_source`)."""

    __tablename__ = "job_step_times"

    job_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True
    )
    nodes: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    replicas: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    atomic_bsz: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    """Samples per worker per iteration."""
    step_s: Mapped[float] = mapped_column(Double)
    sync_s: Mapped[float] = mapped_column(Double)
    """Of ``step_s``, the part spent waiting for the gradient all-reduce (0: not reported)."""
    reports: Mapped[int] = mapped_column(Integer)
    updated_at: Mapped[float] = mapped_column(Double)


class JobLogLineRow(Base):
    """Lines for ``GET /jobs/{id}/logs``; ``id`` is the cursor (``seq``)."""

    __tablename__ = "job_log_lines"
    __table_args__ = (Index("ix_job_log_lines_job_id_id", "job_id", "id"),)

    id: Mapped[int] = mapped_column(SerialId, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(String(64), ForeignKey("jobs.id", ondelete="CASCADE"))
    at: Mapped[float] = mapped_column(Double)
    line: Mapped[str] = mapped_column(Text)


class ApiTokenRow(Base):
    """Only the SHA-256 of a token is stored; the token itself is shown once, at creation."""

    __tablename__ = "api_tokens"
    __table_args__ = (UniqueConstraint("token_hash"),)

    id: Mapped[int] = mapped_column(SerialId, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(128))
    username: Mapped[str] = mapped_column(String(128))
    scopes: Mapped[list[Any]] = mapped_column(JSON)
    token_hash: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[float] = mapped_column(Double)
    revoked_at: Mapped[float | None] = mapped_column(Double)


class IdempotencyKeyRow(Base):
    __tablename__ = "idempotency_keys"
    __table_args__ = (
        # The claim: whoever inserts (user, key) first owns the request.
        UniqueConstraint("username", "key"),
        CheckConstraint("status IN ('in_flight', 'done')", name="status_valid"),
        Index("ix_idempotency_keys_created_at", "created_at"),
    )

    id: Mapped[int] = mapped_column(SerialId, primary_key=True, autoincrement=True)
    username: Mapped[str] = mapped_column(String(128))
    key: Mapped[str] = mapped_column(String(255))
    request_hash: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16))
    response_status: Mapped[int | None] = mapped_column(Integer)
    response_body: Mapped[str | None] = mapped_column(Text)
    job_id: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[float] = mapped_column(Double)


class SchedulerLeaderRow(Base):
    """A single row: the leader's epoch and what ``GET /api/v1/scheduler`` shows."""

    __tablename__ = "scheduler_leader"
    __table_args__ = (CheckConstraint("id = 1", name="single_row"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    epoch: Mapped[int] = mapped_column(BigInteger)
    holder: Mapped[str | None] = mapped_column(String(255))
    acquired_at: Mapped[float | None] = mapped_column(Double)
    heartbeat_at: Mapped[float | None] = mapped_column(Double)
    policy: Mapped[str | None] = mapped_column(String(64))
    round: Mapped[int] = mapped_column(BigInteger)
    last_round_at: Mapped[float | None] = mapped_column(Double)
    last_round_latency_s: Mapped[float | None] = mapped_column(Double)
    last_decisions: Mapped[list[Any]] = mapped_column(JSON)


class UtilizationSampleRow(Base):
    __tablename__ = "utilization_samples"
    __table_args__ = (Index("ix_utilization_samples_at", "at"),)

    id: Mapped[int] = mapped_column(SerialId, primary_key=True, autoincrement=True)
    at: Mapped[float] = mapped_column(Double)
    busy_gpus: Mapped[int] = mapped_column(Integer)
    total_gpus: Mapped[int] = mapped_column(Integer)


jobs = cast(Table, JobRow.__table__)
job_events = cast(Table, JobEventRow.__table__)
allocations = cast(Table, AllocationRow.__table__)
nodes = cast(Table, NodeRow.__table__)
progress_samples = cast(Table, ProgressSampleRow.__table__)
job_log_lines = cast(Table, JobLogLineRow.__table__)
job_step_times = cast(Table, JobStepTimeRow.__table__)
api_tokens = cast(Table, ApiTokenRow.__table__)
idempotency_keys = cast(Table, IdempotencyKeyRow.__table__)
scheduler_leader = cast(Table, SchedulerLeaderRow.__table__)
utilization_samples = cast(Table, UtilizationSampleRow.__table__)
