"""What the control plane learns from an executor's reports about a job: the model facts and
gradient statistics a lease report carries, and what a resize cost (its new gang's
``Started``)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from jigsaw.efficiency.online import merge_block_noise
from jigsaw.model.block_noise import BlockNoise, InvalidNoiseStatisticsError
from jigsaw.model.domain import Job, replace_job
from jigsaw.model.lease_outcome import LeaseOutcome
from jigsaw.model.plan import Plan

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LeaseFacts:
    """What one lease report teaches the control plane about a job, field by field; ``None``
    where it teaches nothing new (the job keeps what it had)."""

    model_blocks: int | None = None
    """The block count K the workers built, for a model the catalog could not profile."""
    plan: Plan | None = None
    """The plan the workers resolved against that K (the job had started with full backprop
    over the model taken as one block)."""
    block_noise: tuple[BlockNoise, ...] | None = None
    """The job's gradient statistics with this report's folded in."""

    def applied_to(self, job: Job) -> Job:
        """``job`` with these facts recorded."""
        return replace_job(
            job,
            model_blocks=job.model_blocks if self.model_blocks is None else self.model_blocks,
            plan=job.plan if self.plan is None else self.plan,
            block_noise=job.block_noise if self.block_noise is None else self.block_noise,
        )


def lease_facts(job: Job, outcome: LeaseOutcome | None) -> LeaseFacts:
    """What ``outcome``, a lease report of ``job``'s gang, teaches: the model's K and plan
    (:func:`learned_model_facts`), then the gradient statistics measured under that plan
    (:func:`measured_noise`)."""
    learned = learned_model_facts(job, outcome)
    plan = learned.plan if learned.plan is not None else job.plan
    return replace(learned, block_noise=measured_noise(job, plan, outcome))


def learned_model_facts(job: Job, outcome: LeaseOutcome | None) -> LeaseFacts:
    """What a lease report teaches the control plane about a model it could not profile: the
    block count K the workers built, and the plan they resolved against it (the scheduler
    had started the job with full backprop, which needs no K)."""
    if outcome is None or outcome.num_blocks is None:
        return LeaseFacts()
    if job.model_blocks is not None or job.plan is None:
        return LeaseFacts()
    blocks = outcome.num_blocks
    if blocks == job.plan.num_blocks:
        return LeaseFacts()
    return LeaseFacts(model_blocks=blocks, plan=outcome.plan)


def measured_noise(
    job: Job, plan: Plan | None, outcome: LeaseOutcome | None
) -> tuple[BlockNoise, ...] | None:
    """The job's gradient statistics with this report's folded in (validated where the report
    entered, see :class:`~jigsaw.model.lease_outcome.LeaseOutcome`); ``None`` when the report
    brings none. Statistics for blocks the job's plan does not have are refused whole and the
    job keeps what it had."""
    if outcome is None or not outcome.block_noise or plan is None:
        return None
    try:
        return merge_block_noise(job.block_noise, outcome.block_noise, plan.num_blocks)
    except InvalidNoiseStatisticsError as error:
        log.warning("job %s: refused gradient statistics: %s", job.id, error)
        return None


def measured_resize(job: Job, at: float) -> float | None:
    """A running job's ``Started`` at ``at``: the seconds its last resize took (``None``: none
    under way) (the
    cycle clears ``resize_s`` when it applies a resize and sets ``resized_at``)."""
    if job.resized_at is None or job.resize_s is not None or at < job.resized_at:
        return None
    return at - job.resized_at
