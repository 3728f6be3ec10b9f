"""The scheduler's state and the queue of waiting jobs."""

from __future__ import annotations

from pydantic import Field

from api.schemas.common import Public, Timestamp
from jigsaw.model.decisions import DecisionKind


class DecisionPublic(Public):
    kind: DecisionKind = Field(
        examples=["start"],
        description="the decision's type: start, preempt, replan or resize",
    )
    job_id: str
    reason: str
    at: Timestamp


class SchedulerPublic(Public):
    policy: str | None = Field(examples=["fifo"])
    round: int
    epoch: int
    leader: bool = Field(description="a scheduler holds leadership and sent a recent heartbeat")
    last_round_at: Timestamp
    last_round_latency_s: float | None
    last_decisions: list[DecisionPublic]


class QueueEntry(Public):
    job_id: str
    name: str
    user: str
    position: int = Field(ge=1)
    estimated_start_at: Timestamp
    estimated_wait_s: float | None = Field(
        description="an estimate from running jobs' remaining iterations and rates; null when "
        "the job cannot start on this cluster as it is"
    )
    blocked: str | None = Field(
        default=None,
        description="why the job cannot start on the cluster as it is (more workers than "
        "alive GPUs, or than its quota); null when it can",
    )
    reason: str = Field(
        default="",
        examples=["needs 4 GPUs, 0 free, behind r18 (#1)"],
        description="why it waits, as the cluster is now: never fits, backing off after a "
        "failure, at its quota, not enough free GPUs, behind the job ahead of it",
    )


class QueuePublic(Public):
    items: list[QueueEntry]
    order: str = Field(
        default="",
        examples=["las: priority, then least attained service, then arrival"],
        description="how the server's policy orders waiting jobs: the order of items",
    )
    note: str = Field(
        default="estimated_start_at and estimated_wait_s are estimates, assuming jobs start in "
        "this order as running jobs finish at their current rates"
    )
