"""The jobs a round must run, and the backfill they allow.

- :func:`critical_starts`: the critical path's waiting jobs (:mod:`.longest_job`), most work
  left first, while the GPUs that pinned and protected jobs do not hold suffice;
- :func:`starving`: with ``promote_s``, the longest-waiting starving job, and the shadow time
  of its reservation where it does not fit (EASY backfilling);
- :func:`held`: a job started or resized too recently to give up what it has.

:func:`~jigsaw.policies.allocator.configurations.exclusive_problem` takes a must-run job's
off column away; the GPU budgets here keep that program feasible.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from jigsaw.model.domain import Job
from jigsaw.model.lifecycle import JobState
from jigsaw.policies.allocator.config import JigsawConfig
from jigsaw.policies.allocator.longest_job import CriticalPath
from jigsaw.policies.allocator.objective import Objective
from jigsaw.policies.allocator.row_memo import held_since


def _room(
    jobs: Sequence[Job],
    allowed: list[list[int]],
    pinned: list[bool],
    protected: list[bool],
    capacity: int,
) -> int:
    """The GPUs left beside the pinned jobs' GPUs and the protected jobs' smallest sizes."""
    budget = capacity - sum(
        len(job.placement) for job, pin in zip(jobs, pinned, strict=True) if pin
    )
    budget -= sum(
        min((n for n in allowed[index] if n > 0), default=len(job.placement))
        for index, job in enumerate(jobs)
        if protected[index] and job.placement
    )
    return budget


def forced(jobs: Sequence[Job], now: float, config: JigsawConfig, critical: CriticalPath) -> int:
    """The GPUs that kept rows' jobs hold and may not give back (at most: a protected elastic
    job could shrink)."""
    return sum(
        len(job.placement)
        for job in jobs
        if job.state is JobState.ADMITTED
        or held(job, now, config.min_hold_s)
        or held(job, now, config.min_run_s)
        or job.id in critical.running
    )


def critical_starts(
    jobs: Sequence[Job],
    allowed: list[list[int]],
    pinned: list[bool],
    protected: list[bool],
    capacity: int,
    critical: CriticalPath,
) -> tuple[set[int], int]:
    """The waiting critical jobs that must start (:mod:`.longest_job`), most work left first,
    while their smallest sizes fit beside the pinned jobs and the protected jobs' smallest
    sizes; and the GPUs left after them."""
    budget = _room(jobs, allowed, pinned, protected, capacity)
    at = {job.id: index for index, job in enumerate(jobs)}
    chosen: set[int] = set()
    used = 0
    for job_id in critical.waiting:
        index = at.get(job_id)
        if index is None or pinned[index] or jobs[index].placement:
            continue
        sizes = [n for n in allowed[index] if n > 0]
        if sizes and min(sizes) <= budget - used:
            chosen.add(index)
            used += min(sizes)
    return chosen, capacity - used


def starving(
    jobs: Sequence[Job],
    allowed: list[list[int]],
    pinned: list[bool],
    protected: list[bool],
    sharing: list[bool],
    objective: Objective,
    capacity: int,
    remaining_s: Callable[[Job], float] | None,
) -> tuple[set[int], float | None]:
    """The starving jobs that must run this round: longest-waiting first, while their
    smallest sizes fit beside the pinned jobs' GPUs and the protected jobs' smallest sizes;
    and, when a starving job did not fit, the *shadow time* of its reservation: when enough
    protections will have ended for it to fit (:func:`_shadow_time`). Until then a waiting job
    may start only if it ends by then (``None``: no reservation).

    Of the waiting ones only the longest-waiting is promoted (one reservation at a time, as
    EASY backfilling keeps one): promoting every waiting job past the threshold turned a
    backlog into FIFO with evictions (philly-low, 30-minute pin: 21.9 h average JCT against
    3.81 h). A starving job that runs keeps running (it loses its off column)."""
    if objective.config.promote_s == math.inf:
        return set(), None  # the pin is off (the default): nobody starves by the clock
    budget = _room(jobs, allowed, pinned, protected, capacity)
    candidates = sorted(
        (
            index
            for index, job in enumerate(jobs)
            if not pinned[index]
            and not protected[index]  # already kept running
            and not sharing[index]  # a guest: it runs on a shared slot
            and objective.starving(job)
            and len(allowed[index]) > 1
        ),
        key=lambda index: (-objective.waited_s(jobs[index]), jobs[index].id),
    )
    chosen: set[int] = set()
    promoted = False
    for index in candidates:
        waiting = not jobs[index].placement
        if waiting and promoted:
            continue
        promoted = promoted or waiting
        smallest = min(n for n in allowed[index] if n > 0)
        if smallest <= budget:
            chosen.add(index)
            budget -= smallest
        else:
            kept = [
                (job, min((n for n in allowed[i] if n > 0), default=len(job.placement)))
                for i, job in enumerate(jobs)
                if protected[i] and job.placement and i not in chosen
            ]
            return chosen, _shadow_time(kept, smallest - budget, objective, remaining_s)
    return chosen, None


def _shadow_time(
    held: list[tuple[Job, int]],
    short: int,
    objective: Objective,
    remaining_s: Callable[[Job], float] | None,
) -> float:
    """When the protected jobs ``held`` (each with the GPUs its protection keeps) will have
    given back ``short`` GPUs: each gives them back when its minimum run ends (the latest it
    can be kept from the reservation) or, if sooner, when it is estimated to finish. Counting
    the finishes keeps the shadow time put while jobs backfill: a job started because it
    ends by the shadow time frees its GPUs by then, so the next round's shadow time is no
    later (the policy keeps no state; the reservation holds because it is recomputed the
    same). ``now`` when they never suffice (pinned jobs hold the rest): nobody backfills."""
    config, now = objective.config, objective.now

    def release(job: Job) -> float:
        protected_until = held_since(job) + config.min_run_s
        if remaining_s is None:
            return protected_until
        return min(protected_until, now + remaining_s(job))

    ends = sorted((release(job), gpus) for job, gpus in held)
    freed = 0
    for end, gpus in ends:
        freed += gpus
        if freed >= short:
            return max(end, now)
    return now


def ends_by(
    job: Job, shadow: float, now: float, remaining_s: Callable[[Job], float] | None
) -> bool:
    """The waiting ``job``, started now, is done by ``shadow`` (it cannot delay the
    reservation): never without an estimate."""
    return remaining_s is not None and now + remaining_s(job) <= shadow


def held(job: Job, now: float, hold_s: float) -> bool:
    """Started or resized less than ``hold_s`` ago: it keeps what it has."""
    if hold_s <= 0 or job.state is not JobState.RUNNING:
        return False
    return now - held_since(job) < hold_s
