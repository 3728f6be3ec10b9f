"""A job's statistical efficiency, online: eta of any candidate plan from the gradient noise
its own lease reports measured (:mod:`jigsaw.efficiency.model`), with a stated prior until
every block has
been measured often enough.

The control plane folds each lease report's ``block_noise`` into the job
(:func:`merge_block_noise`, called by the scheduling cycle); policies, the API and the CLI ask
:func:`job_eta` or :func:`candidate_etas`. Every estimate names its source: ``online``,
``full backprop``, or the prior's (``measured table``, ``default``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jigsaw.efficiency.model import (
    DEFAULT_MIN_OBSERVATIONS,
    OnlineEta,
    Prior,
    default_prior,
    prior_from_table,
)
from jigsaw.efficiency.table import EfficiencyTable, EtaEstimate
from jigsaw.model.block_noise import BlockNoise, InvalidNoiseStatisticsError
from jigsaw.model.domain import Job
from jigsaw.model.plan import SPBPlan, full_backprop, staircase, uniform

PriorOf = Callable[[Job], Prior]
"""The prior of a job (its model's measured table entry, or the conservative default)."""


def table_prior(table: EfficiencyTable) -> PriorOf:
    """Priors from the efficiency table (measured convergence runs, else the default)."""

    def prior_of(job: Job) -> Prior:
        model = job.spec.model
        return prior_from_table(lambda plan: table.lookup(model, plan))

    return prior_of


def merge_block_noise(
    current: Sequence[BlockNoise], reported: Sequence[BlockNoise], num_blocks: int
) -> tuple[BlockNoise, ...]:
    """The job's statistics after one report: per block, the newer of the two. ``reported``
    holds statistics validated where the report entered
    (:class:`~jigsaw.model.lease_outcome.LeaseOutcome`); a block outside the job's ``num_blocks``
    raises :class:`~jigsaw.model.block_noise.InvalidNoiseStatisticsError` and changes nothing
    (the caller keeps ``current``)."""
    for entry in reported:
        if entry.block > num_blocks:
            raise InvalidNoiseStatisticsError(
                f"lease report: block {entry.block}: block must be in 1..{num_blocks}"
            )
    newest = {entry.block: entry for entry in current if entry.block <= num_blocks}
    for entry in reported:
        kept = newest.get(entry.block)
        if kept is None or entry.last_iteration >= kept.last_iteration:
            newest[entry.block] = entry
    return tuple(newest[block] for block in sorted(newest))


def job_eta(
    job: Job,
    plan: SPBPlan,
    prior: Prior = default_prior,
    *,
    min_observations: int = DEFAULT_MIN_OBSERVATIONS,
) -> EtaEstimate:
    """eta of ``plan`` for ``job``: online from its statistics once every block has
    ``min_observations``, else ``prior``. Statistics of another block count are ignored."""
    estimator = OnlineEta(plan.num_blocks, prior, min_observations)
    if job.block_noise and all(entry.block <= plan.num_blocks for entry in job.block_noise):
        estimator.update(job.block_noise)
    return estimator.estimate(plan, batch=job.spec.batch_size)


@dataclass(frozen=True, slots=True)
class CandidateEta:
    label: str
    plan: SPBPlan
    estimate: EtaEstimate


def candidate_plans(workers: int, num_blocks: int) -> list[tuple[str, SPBPlan]]:
    """The plans an ``auto`` job may be given: none, staircase, uniform:k for k in 1..K-1."""
    plans = [("none", full_backprop(workers, num_blocks))]
    if workers > 1:
        plans.append(("staircase", staircase(workers, num_blocks)))
        plans.extend(
            (f"uniform:{k}", uniform(workers, num_blocks, k)) for k in range(1, num_blocks)
        )
    return plans


def candidate_etas(job: Job, num_blocks: int, prior: Prior = default_prior) -> list[CandidateEta]:
    return [
        CandidateEta(label, plan, job_eta(job, plan, prior))
        for label, plan in candidate_plans(job.spec.workers, num_blocks)
    ]


def noise_summary(job: Job) -> Mapping[str, Any]:
    """How much the estimate rests on: blocks measured and their fewest observations."""
    observations = [entry.observations for entry in job.block_noise]
    return {
        "blocks_measured": len(job.block_noise),
        "fewest_observations": min(observations, default=0),
        "needed_observations": DEFAULT_MIN_OBSERVATIONS,
    }
