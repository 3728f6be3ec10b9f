"""Orderings shared by the preemptive policies: Tiresias-style LAS and Gavel-style max-min.

Both read only what a :class:`~jigsaw.model.domain.Job` already records (attained GPU-seconds,
submit time, priority), so a policy stays a pure function of the snapshot.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from jigsaw.model.domain import Job

_FOREVER = float("inf")


@dataclass(frozen=True, slots=True)
class LasConfig:
    """Discretized 2D least-attained-service (Tiresias).

    ``thresholds`` are attained GPU-seconds (time x GPUs): a job moves down to queue ``i + 1``
    once it has received ``thresholds[i]``. Within a queue jobs run in arrival order. A job
    that has waited longer than ``promote_knob`` times its own run time (and at least
    ``promote_floor_s``) is promoted back to queue 0 (ordered by arrival), so no job starves.
    """

    thresholds: tuple[float, ...] = (3_600.0, 36_000.0)
    promote_knob: float = 8.0
    promote_floor_s: float = 3_600.0

    def __post_init__(self) -> None:
        if list(self.thresholds) != sorted(self.thresholds) or any(t <= 0 for t in self.thresholds):
            raise ValueError("LAS thresholds must be positive and increasing")
        if self.promote_knob <= 0 or self.promote_floor_s < 0:
            raise ValueError("promote_knob must be > 0 and promote_floor_s >= 0")


LasKey = tuple[int, int, float, str]
"""(-priority, LAS queue, submit time, job id): the smallest key ranks first; unique per job."""


class LasStanding(NamedTuple):
    """Where a job stands in LAS at one moment, and how that moves while its record does not."""

    key: LasKey
    next_threshold_at: float
    """When its attained service reaches the next threshold (inf: not running, or past the
    last threshold)."""
    starvation: tuple[tuple[float, float], tuple[float, float]]
    """The starvation test's two differences, each as (value now, change per second): the
    job starves while both are positive, so the test flips where either changes sign."""


def las_standing(job: Job, now: float, config: LasConfig) -> LasStanding:
    """The one LAS key computation (:func:`las_key`, the kept ranking and the stability
    bounds all read it).

    The key: higher priority first, then lower LAS queue, then arrival order. The queue is
    how many thresholds the attained service has passed, or 0 for a starving job, one that
    has waited more than ``promote_knob`` x its run time and more than ``promote_floor_s``.
    A promoted job keeps its promotion while it runs, until its run time catches up (a
    quantum proportional to its wait), so promoted jobs do not preempt each other round
    after round.
    """
    attained = job.attained_service(now)
    rate = float(len(job.placement)) if job.run_started_at is not None else 0.0
    workers = job.spec.workers
    executed = attained / workers
    waited = now - job.submitted_at - executed
    thresholds, knob = config.thresholds, config.promote_knob
    index = bisect.bisect_right(thresholds, attained)
    threshold_at = _FOREVER
    if rate > 0.0 and index < len(thresholds):
        threshold_at = now + (thresholds[index] - attained) / rate
    rate_executed = rate / workers
    rate_waited = 1.0 - rate_executed
    starvation = (
        (waited - knob * executed, rate_waited - knob * rate_executed),
        (waited - config.promote_floor_s, rate_waited),
    )
    # ``a - b > 0`` exactly when ``a > b``: float subtraction never rounds a gap to zero.
    starving = starvation[0][0] > 0.0 and starvation[1][0] > 0.0
    key = (-job.spec.priority, 0 if starving else index, job.submitted_at, job.id)
    return LasStanding(key, threshold_at, starvation)


def las_key(job: Job, now: float, config: LasConfig) -> LasKey:
    """The job's LAS sort key at ``now`` (:func:`las_standing`)."""
    return las_standing(job, now, config).key


def las_order(jobs: Sequence[Job], now: float, config: LasConfig) -> list[Job]:
    """Jobs sorted by :func:`las_key`."""
    return sorted(jobs, key=lambda job: las_key(job, now, config))


def priority_weight(priority: int) -> float:
    """Max-min weight of a JobSpec priority: 0 -> 1, +p -> 1 + p, -p -> 1 / (1 + p)."""
    return 1.0 + priority if priority >= 0 else 1.0 / (1.0 - priority)


def fair_shares(jobs: Sequence[Job], capacity: int) -> dict[str, float]:
    """Max-min fair fraction of time ``x_j`` in [0, 1] each gang may run (weighted).

    Water-filling on ``x_j = min(1, t * w_j)`` subject to ``sum_j x_j * workers_j <= capacity``,
    the homogeneous-cluster case of Gavel's max-min fairness LP.
    """
    if not jobs:
        return {}
    demand = {job.id: (priority_weight(job.spec.priority), job.spec.workers) for job in jobs}
    if sum(workers for _, workers in demand.values()) <= capacity:
        return dict.fromkeys(demand, 1.0)
    # Jobs saturate (x = 1) in order of 1 / w; between saturations, usage is linear in t.
    by_saturation = sorted(demand.items(), key=lambda item: (1.0 / item[1][0], item[0]))
    saturated_gpus = 0.0
    rising = sum(w * n for w, n in demand.values())
    t = 0.0
    for _, (weight, workers) in by_saturation:
        t_sat = 1.0 / weight
        if saturated_gpus + rising * t_sat >= capacity:
            t = (capacity - saturated_gpus) / rising
            break
        saturated_gpus += workers
        rising -= weight * workers
        t = t_sat
    return {job_id: min(1.0, t * weight) for job_id, (weight, _) in demand.items()}


def fairness_deficit(job: Job, now: float, share: float) -> float:
    """GPU-seconds the job is behind its fair share since it arrived (positive: owed)."""
    age = max(now - job.submitted_at, 0.0)
    return share * age * job.spec.workers - job.attained_service(now)


def maxmin_order(jobs: Sequence[Job], now: float, shares: Mapping[str, float]) -> list[Job]:
    """Most-owed first (normalized by gang size and fair share), ties by arrival."""

    def key(job: Job) -> tuple[float, float, str]:
        share = shares.get(job.id, 0.0)
        normalizer = max(share * job.spec.workers, 1e-9)
        return (-fairness_deficit(job, now, share) / normalizer, job.submitted_at, job.id)

    return sorted(jobs, key=key)


def las_stable_until(jobs: Sequence[Job], now: float, config: LasConfig) -> float:
    """The earliest time after ``now`` at which some job's :func:`las_key` may differ, if
    no job changes state meanwhile (inf: never).

    A key changes only when attained service crosses a threshold or the starvation test
    (:func:`las_key`) flips. Between state changes a job's attained service, run time and
    waiting time are linear in time, so each crossing is the root of a linear function.
    The result is a lower bound: a round skipped before it would decide what the last one
    did, so a simulator may jump straight to it.
    """
    soonest = _FOREVER
    for job in jobs:
        until = job_stable_until(job, now, config)
        if until < soonest:
            soonest = until
    return soonest


def job_stable_until(job: Job, now: float, config: LasConfig) -> float:
    """One job's share of :func:`las_stable_until`: the earliest crossing at or after ``now``."""
    standing = las_standing(job, now, config)
    soonest = standing.next_threshold_at
    for value, slope in standing.starvation:
        if slope != 0.0:
            root = now - value / slope
            if now <= root < soonest:
                soonest = root
    return soonest
