"""How long a job still needs on GPUs of its own: the completion guard's pace and the
starvation reservation's backfill both ask it.

The estimate is the job's remaining iterations at its best exclusive plan's iteration time at
the size it asked for (:meth:`~jigsaw.policies.shared.plans.PlanCatalog.default_option`). A
running job's progress since its run began is counted at that speed, which errs towards
less remaining (a host near its end is protected; a backfilled job is trusted to end a
little early, the reservation's only risk).
"""

from __future__ import annotations

import math

from jigsaw.model.domain import Job
from jigsaw.policies.shared.plans import PlanCatalog


def remaining_seconds(catalog: PlanCatalog, job: Job, now: float, running: bool) -> float:
    """Seconds of work left at the job's requested size; ``inf`` for a job the catalog cannot
    price (no profile), so it is never taken for short."""
    option = catalog.default_option(job)
    if option.goodput <= 0:
        return math.inf
    iteration_s = option.eta / option.goodput
    done = job.iterations_done
    if running and job.run_started_at is not None:
        done += max(now - job.run_started_at, 0.0) / iteration_s
    return max(job.spec.iterations - done, 1.0) * iteration_s
