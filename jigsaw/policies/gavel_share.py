"""Gavel's max-min ranking on a homogeneous cluster (``maxmin`` with ``ranking="gavel"``).

Read from stanford-futuredata/gavel (``scheduler/policies/max_min_fairness.py`` and
``Scheduler._update_priorities``), reimplemented:

- **Allocation.** Gavel's LP maximises the smallest ``scale_j x_j / w_j`` subject to
  ``sum_j scale_j x_j <= GPUs`` and ``x_j <= 1``: every job gets the same *GPU* share
  ``x_j scale_j = t w_j`` (a 4-GPU gang gets a quarter of the time a 1-GPU job gets). The LP
  leaves any slack after the smallest value unspecified; we water-fill it (:func:`gavel_shares`).
- **Priority.** A job's priority is ``x_j / fraction_j``, where ``fraction_j`` is its share of
  the GPU time handed out; a job that has had none ranks first. Gavel counts that time since
  the last allocation reset (at least 1,920 s apart); we count it since arrival, which a
  snapshot records (docs/SCHEDULER.md lists the difference). Ties go to the earlier arrival.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from jigsaw.domain import Job
from jigsaw.policies.fairness import priority_weight


def gavel_shares(jobs: Sequence[Job], capacity: int) -> dict[str, float]:
    """Time fraction ``x_j`` in [0, 1] per job: equal weighted GPU shares, water-filled."""
    if not jobs:
        return {}
    demand = {job.id: (priority_weight(job.spec.priority), job.spec.workers) for job in jobs}
    if sum(workers for _, workers in demand.values()) <= capacity:
        return dict.fromkeys(demand, 1.0)
    # GPU use of job j is min(workers_j, t w_j); it saturates at t = workers_j / w_j.
    by_saturation = sorted(demand.items(), key=lambda item: (item[1][1] / item[1][0], item[0]))
    saturated = 0.0
    rising = sum(weight for weight, _ in demand.values())
    t = 0.0
    for _, (weight, workers) in by_saturation:
        t_sat = workers / weight
        if saturated + rising * t_sat >= capacity:
            t = (capacity - saturated) / rising
            break
        saturated += workers
        rising -= weight
        t = t_sat
    return {job_id: min(1.0, t * weight / workers) for job_id, (weight, workers) in demand.items()}


def gavel_order(jobs: Sequence[Job], now: float, shares: Mapping[str, float]) -> list[Job]:
    """Highest ``x / fraction`` first: jobs with no GPU time yet (larger ``x`` first), then
    the least GPU time per unit of allocation; ties by arrival."""

    def key(job: Job) -> tuple[int, float, float, str]:
        share = max(shares.get(job.id, 0.0), 1e-12)
        served = job.attained_service(now)
        if served <= 0.0:
            return (0, -share, job.submitted_at, job.id)
        return (1, served / share, job.submitted_at, job.id)

    return sorted(jobs, key=key)
