"""What a policy may decide. Policies return these and change nothing themselves.

A decision that places a gang (:class:`Start`, :class:`Replan`, :class:`Resize`) carries no
worker count of its own: it is the plan's, one rank per entry of the placement, and each
checks the two agree when it is built."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from jigsaw.model.cluster import Placement
from jigsaw.model.plan import Plan

DecisionKind = Literal["start", "preempt", "replan", "resize"]
"""Each decision type's name where decisions are recorded and shown (the scheduler's last
decisions). A type's ``kind`` must be one of these, so a new type cannot go unnamed (mypy)."""


@dataclass(frozen=True, slots=True)
class Start:
    """Reserve ``placement`` for a waiting job's whole gang and launch it with ``plan``."""

    kind: ClassVar[DecisionKind] = "start"
    job_id: str
    placement: Placement
    plan: Plan
    reason: str
    worker_batch: int | None = None
    """Samples each worker takes per iteration; ``None``: the spec's ``batch_size`` (every
    policy that does not choose batches)."""

    def __post_init__(self) -> None:
        _one_rank_per_gpu("start", self.job_id, self.plan, self.placement)


@dataclass(frozen=True, slots=True)
class Preempt:
    """Checkpoint and stop a running job; ``by`` names the job it makes room for."""

    kind: ClassVar[DecisionKind] = "preempt"
    job_id: str
    reason: str
    by: str | None = None


@dataclass(frozen=True, slots=True)
class Replan:
    """Switch a running job to a new SPB plan and/or placement at its next lease boundary."""

    kind: ClassVar[DecisionKind] = "replan"
    job_id: str
    plan: Plan
    placement: Placement
    reason: str

    def __post_init__(self) -> None:
        _one_rank_per_gpu("re-plan", self.job_id, self.plan, self.placement)


@dataclass(frozen=True, slots=True)
class Resize:
    """Restart a running elastic job at its next lease boundary on ``placement`` with ``plan``
    (its worker count is the new size) and ``worker_batch`` samples per worker per iteration.

    Unlike :class:`Replan` a resize restarts the gang from a checkpoint (the executor charges
    the restart) and may change the global batch (``plan.num_workers * worker_batch``).
    Only policies that size jobs emit it; the others never do.

    The one typed value of a resize, from the policy through the cycle (which records it on
    the job: ``plan``, ``placement``, ``Job.worker_batch``) to the executor and the workers.
    The worker count is not a field of its own: it is the plan's (``plan.num_workers``, one
    rank per entry of ``placement``), so the two cannot disagree.
    """

    kind: ClassVar[DecisionKind] = "resize"
    job_id: str
    placement: Placement
    plan: Plan
    worker_batch: int
    reason: str

    def __post_init__(self) -> None:
        _one_rank_per_gpu("resize", self.job_id, self.plan, self.placement)
        if self.worker_batch < 1:
            raise ValueError(f"resize of {self.job_id}: worker_batch must be >= 1")


Decision = Start | Preempt | Replan | Resize


def _one_rank_per_gpu(what: str, job_id: str, plan: Plan, placement: Placement) -> None:
    """A decision's worker count is its plan's: one rank per entry of its placement."""
    if plan.num_workers != len(placement):
        raise ValueError(
            f"{what} of {job_id}: the plan has {plan.num_workers} workers but the "
            f"placement {len(placement)} GPUs"
        )
