"""Orderings shared by the preemptive policies: Tiresias-style LAS and Gavel-style max-min.

Both read only what a :class:`~jigsaw.domain.Job` already records (attained GPU-seconds,
submit time, priority), so a policy stays a pure function of the snapshot.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from jigsaw.domain import Job


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


def executed_s(job: Job, now: float) -> float:
    """Wall-clock seconds this job has run (attained GPU-seconds over its gang size)."""
    return job.attained_service(now) / job.spec.workers


def waited_s(job: Job, now: float) -> float:
    """Seconds since submission not spent running: queueing plus preempted time."""
    return max(now - job.submitted_at - executed_s(job, now), 0.0)


def is_starving(job: Job, now: float, config: LasConfig) -> bool:
    """Waited more than ``promote_knob`` x its run time. A promoted job keeps its promotion
    while it runs, until its run time catches up (a quantum proportional to its wait), so
    promoted jobs do not preempt each other round after round."""
    limit = max(config.promote_knob * executed_s(job, now), config.promote_floor_s)
    return waited_s(job, now) > limit


def las_queue(job: Job, now: float, config: LasConfig) -> int:
    if is_starving(job, now, config):
        return 0
    return bisect.bisect_right(config.thresholds, job.attained_service(now))


def las_key(job: Job, now: float, config: LasConfig) -> tuple[int, int, float, str]:
    """Sort key: higher priority first, then lower LAS queue, then arrival order.

    Same as (priority, :func:`las_queue`, ...) with the attained service computed once: this
    runs for every active job in every round.
    """
    attained = job.attained_service(now)
    executed = attained / job.spec.workers
    waited = now - job.submitted_at - executed
    if waited > config.promote_knob * executed and waited > config.promote_floor_s:
        queue = 0
    else:
        queue = bisect.bisect_right(config.thresholds, attained)
    return (-job.spec.priority, queue, job.submitted_at, job.id)


def las_order(jobs: Sequence[Job], now: float, config: LasConfig) -> list[Job]:
    """Jobs sorted by :func:`las_key`, which is inlined here: every round ranks every job."""
    knob, floor, thresholds = config.promote_knob, config.promote_floor_s, config.thresholds
    keyed = []
    for job in jobs:
        attained = job.attained_gpu_seconds
        started = job.run_started_at
        if started is not None and now > started:
            attained += (now - started) * len(job.placement)
        executed = attained / job.spec.workers
        waited = now - job.submitted_at - executed
        if waited > knob * executed and waited > floor:
            queue = 0
        else:
            queue = bisect.bisect_right(thresholds, attained)
        keyed.append(((-job.spec.priority, queue, job.submitted_at, job.id), job))
    keyed.sort(key=_first)
    return [job for _, job in keyed]


def _first(pair: tuple[tuple[int, int, float, str], Job]) -> tuple[int, int, float, str]:
    return pair[0]


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


_FOREVER = float("inf")


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
    """One job's share of :func:`las_stable_until`: the earliest root at or after ``now``."""
    soonest = _FOREVER
    knob, floor, thresholds = config.promote_knob, config.promote_floor_s, config.thresholds
    workers = job.spec.workers
    attained = job.attained_gpu_seconds
    started = job.run_started_at
    rate_attained = 0.0
    if started is not None:
        rate_attained = float(len(job.placement))
        if now > started:
            attained += (now - started) * rate_attained
    executed = attained / workers
    waited = now - job.submitted_at - executed
    rate_executed = rate_attained / workers
    rate_waited = 1.0 - rate_executed
    if rate_attained > 0.0:
        index = bisect.bisect_right(thresholds, attained)
        if index < len(thresholds):
            soonest = now + (thresholds[index] - attained) / rate_attained
    # The starvation test flips where either linear difference changes sign.
    for value, slope in (
        (waited - knob * executed, rate_waited - knob * rate_executed),
        (waited - floor, rate_waited),
    ):
        if slope != 0.0:
            root = now - value / slope
            if now <= root < soonest:
                soonest = root
    return soonest
