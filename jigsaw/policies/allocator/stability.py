"""When a jigsaw round that decided nothing stays so: the policy's ``stable_until`` hint.

Between events a round's prices move only through a restarted job's discount (it rises with
the job's age), the guests' prices and the elastic jobs' reports; a job's weight is fixed
while it runs or waits (it counts the service it had when its run began,
:meth:`~.objective.Objective.weight`). So a round is stable when:

- no elastic job the goodput source knows, no guest running, no co-tenancy offered;
- either every running job is pinned or protected (no off column: a waiting job can only
  start on free GPUs, where none fitted, and a waiting job's value only rises), or no
  waiting job's discount moves (never started, with a free launch), so every column's cost
  stays what it is;
- no running job is starving beside a waiting one that starves (the longest waiters run
  first, and only the waiting ones' waits grow).

Then the answer holds until a protection or hold ends, a waiting job starts starving, a
restarted job's discount leaves zero, or a back-off ends; with nothing waiting, until the
next arrival or finish. ``None`` otherwise: ask every round. tests/core/simulator/
test_simulator_skip.py replays with and without the skip and compares the decision logs.
"""

from __future__ import annotations

import math

from jigsaw.model.domain import Job
from jigsaw.model.snapshot import Snapshot
from jigsaw.policies.allocator.config import JigsawConfig
from jigsaw.policies.allocator.configurations import OFF, Problem, held_since
from jigsaw.policies.allocator.objective import Objective


def stable_until(problem: Problem, snapshot: Snapshot, config: JigsawConfig) -> float | None:
    """The earliest time the answer to ``problem`` (the round solved at ``snapshot``) could
    change without an arrival or finish; ``None``: it may change any round."""
    if problem.cotenancy_offered:
        return None
    objective = Objective(config, snapshot.now, 1)
    evictable = starving_runs = moving_prices = starving_waits = False
    for index, view in enumerate(problem.views):
        job = view.job
        if view.guest_of is not None:
            return None
        if view.goodput is not None and job.spec.is_elastic:
            return None
        if view.current:
            if any(problem.columns[c].kind == OFF for c in problem.by_job[index]):
                evictable = True
                starving_runs = starving_runs or objective.starving(job)
        else:
            moving_prices = moving_prices or _discount_moves(job, objective)
            starving_waits = starving_waits or objective.starving(job)
    if (evictable and moving_prices) or (starving_runs and starving_waits):
        return None
    retry = snapshot.next_retry_at
    return min(_crossings(problem, objective), retry if retry is not None else math.inf)


def _discount_moves(job: Job, objective: Objective) -> bool:
    """The waiting job's discount changes with its age (:meth:`Objective.discount`): it has
    run before and restarts cost time, or its launch does."""
    if job.attempt == 0:
        return objective.config.launch_s > 0
    return objective.restart_s(job) > 0


def _crossings(problem: Problem, objective: Objective) -> float:
    """The first moment after now at which a pin, protection or price changes by itself: a
    hold or minimum run ends, a waiting job starts starving, a restarted job's discount
    leaves zero."""
    config, now = objective.config, objective.now
    found = math.inf
    for view in problem.views:
        job = view.job
        if view.current:
            if job.run_started_at is None:
                continue  # admitted: pinned until its start (an executor event)
            since = held_since(job)
            for hold in (config.min_hold_s, config.min_run_s):
                if hold > 0 and since + hold > now:
                    found = min(found, since + hold)
            continue
        waited = objective.waited_s(job)
        if math.isfinite(config.promote_s) and waited <= config.promote_s:
            found = min(found, now + (config.promote_s - waited))
        restarts = max(job.attempt - 1, 0) + job.resizes
        zero_until = job.submitted_at + restarts * objective.restart_s(job)
        if zero_until > now:
            found = min(found, zero_until)
    return found
