"""The job that sets the makespan: kept running where ``protect_longest`` is on.

The *drain horizon* is how long the cluster needs, at best, to finish all the work it holds:
every running and waiting job's GPUs times its remaining seconds
(:mod:`.remaining`), summed and divided by the cluster's GPUs. A running job whose own
remaining seconds reach the horizon cannot finish before everything else, however the rest
is packed: it is the critical path, and every hour it waits is an hour more of makespan.
The *longest* such job (the running job with the most seconds left, if it is critical) loses
its off column: it is never preempted. One job at most, so the GPUs it keeps are few.

Measured on Philly's fortnights (docs/BENCHMARKS.md, "The longest job kept running"): on
philly-high one 8-GPU job, preempted after 237 h and kept waiting 391 h behind fresher
jobs, set the makespan; kept running, the makespan is the shortest peer's. On by default
under jigsaw's semantics (with the work-left weight); it does not reach philly-mid's
makespan, set by an 8-GPU job preempted before it was critical and a 16-GPU gang that
waits 375 h without running (the horizon counts no job yet to arrive).

By the clock alone the choice changes only when the job's remaining seconds fall below the
horizon: both fall while it runs, the job's at one second per second and the horizon's at
the running GPUs' share of the cluster, so a job stays critical on a full cluster and
stops being so at a known moment otherwise (:attr:`Longest.until`). Which running job has
the most left does not change by the clock (they all count down together).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from jigsaw.model.domain import Job


@dataclass(frozen=True, slots=True)
class Longest:
    job_id: str | None
    """The running job kept (``None``: none is critical)."""
    until: float
    """When it stops being critical by the clock alone (``inf``: not before an event)."""


NONE = Longest(None, math.inf)


def longest_critical(
    running: Sequence[Job],
    waiting: Sequence[Job],
    capacity: int,
    now: float,
    remaining_s: Callable[[Job, bool], float],
) -> Longest:
    """The running job with the most seconds left, if they reach the drain horizon of
    ``running`` and ``waiting`` on ``capacity`` GPUs; ``remaining_s(job, running)``: its
    seconds of work left (``inf``: unknown, never counted)."""
    if capacity <= 0 or not running:
        return NONE
    work = 0.0
    busy = 0
    best: tuple[float, str] | None = None
    for job in running:
        left = remaining_s(job, True)
        if not math.isfinite(left):
            continue
        work += job.spec.workers * left
        busy += job.spec.workers
        # The most left; of equals, the earliest id (a rule that does not move by the clock).
        if best is None or left > best[0] or (left == best[0] and job.id < best[1]):
            best = (left, job.id)
    if best is None:
        return NONE
    for job in waiting:
        left = remaining_s(job, False)
        if math.isfinite(left):
            work += job.spec.workers * left
    horizon = work / capacity
    left, job_id = best
    if left < horizon:
        return NONE
    # d(left - horizon)/dt = -1 + busy / capacity: it falls only while GPUs are idle.
    falls = 1.0 - busy / capacity
    until = now + (left - horizon) / falls if falls > 0 else math.inf
    return Longest(job_id, until)
