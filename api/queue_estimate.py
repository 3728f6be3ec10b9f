"""Queue positions and estimated start times for waiting jobs (an estimate, and labelled so).

The estimate replays the queue in the policy's order (:mod:`api.queue_order`): each running job
frees its GPUs when its remaining iterations are done at its rate, and each waiting job starts
as soon as enough GPUs are free and every job ahead of it has started. Policies that preempt,
pack or resize (las, maxmin, jigsaw) may start a job sooner: it is an estimate.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from jigsaw.model.domain import Job


@dataclass(frozen=True, slots=True)
class QueueEstimate:
    job: Job
    position: int
    start_at: float | None
    """``None``: the job needs more GPUs than the cluster has alive."""


def estimate_queue(
    running: Sequence[Job],
    waiting: Sequence[Job],
    total_gpus: int,
    now: float,
    rate_of: Callable[[Job], float],
) -> list[QueueEstimate]:
    """``waiting`` in the order the policy takes them; ``running``: the jobs holding GPUs."""
    releases: list[tuple[float, int]] = []
    free = total_gpus
    for job in running:
        if not job.state.holds_resources:
            continue
        gpus = len(job.placement) or job.spec.workers
        free -= gpus
        heapq.heappush(releases, (now + _duration(job, rate_of), gpus))
    clock = now
    estimates: list[QueueEstimate] = []
    for position, job in enumerate(waiting, start=1):
        need = job.spec.workers
        if need > total_gpus:
            estimates.append(QueueEstimate(job, position, None))
            continue
        while free < need and releases:
            moment, gpus = heapq.heappop(releases)
            clock = max(clock, moment)
            free += gpus
        clock = max(clock, job.retry_after or 0.0)
        free -= need
        heapq.heappush(releases, (clock + _duration(job, rate_of), need))
        estimates.append(QueueEstimate(job, position, clock))
    return estimates


def _duration(job: Job, rate_of: Callable[[Job], float]) -> float:
    rate = rate_of(job)
    return job.remaining_iterations / rate if rate > 0 else float("inf")
