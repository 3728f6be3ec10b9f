"""What the control plane learns from an executor's reports about a job: the model facts and
gradient statistics a lease report carries, and what a resize cost (its new gang's
``Started``)."""

from __future__ import annotations

import logging
from typing import Any

from jigsaw.efficiency.online import merge_block_noise
from jigsaw.model.block_noise import InvalidNoiseStatisticsError
from jigsaw.model.domain import Job
from jigsaw.model.lease_outcome import LeaseOutcome
from jigsaw.model.plan import Plan

log = logging.getLogger(__name__)


def learned_model_facts(job: Job, outcome: LeaseOutcome | None) -> dict[str, Any]:
    """What a lease report teaches the control plane about a model it could not profile: the
    block count K the workers built, and the plan they resolved against it (the scheduler
    had started the job with full backprop, which needs no K)."""
    if outcome is None or outcome.num_blocks is None:
        return {}
    if job.model_blocks is not None or job.plan is None:
        return {}
    blocks = outcome.num_blocks
    if blocks == job.plan.num_blocks:
        return {}
    if outcome.plan is None:
        return {"model_blocks": blocks}
    return {"model_blocks": blocks, "plan": outcome.plan}


def measured_noise(job: Job, plan: Plan | None, outcome: LeaseOutcome | None) -> dict[str, Any]:
    """The job's gradient statistics with this report's folded in (validated where the report
    entered, see :class:`~jigsaw.model.lease_outcome.LeaseOutcome`). Statistics for blocks the job's
    plan does not have are refused whole and the job keeps what it had."""
    if outcome is None or not outcome.block_noise or plan is None:
        return {}
    try:
        return {
            "block_noise": merge_block_noise(job.block_noise, outcome.block_noise, plan.num_blocks)
        }
    except InvalidNoiseStatisticsError as error:
        log.warning("job %s: refused gradient statistics: %s", job.id, error)
        return {}


def measured_resize(job: Job, at: float) -> float | None:
    """A running job's ``Started`` at ``at``: the seconds its last resize took (``None``: none
    under way) (the
    cycle clears ``resize_s`` when it applies a resize and sets ``resized_at``)."""
    if job.resized_at is None or job.resize_s is not None or at < job.resized_at:
        return None
    return at - job.resized_at
