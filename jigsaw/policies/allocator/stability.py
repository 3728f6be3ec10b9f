"""When a jigsaw round that decided nothing stays so: the policy's ``stable_until`` hint.

Between events a round's prices move only through a restarted job's discount (it rises with
the job's age), the guests' prices and the elastic jobs' reports; a job's weight is fixed
while it runs or waits (it counts the service it had when its run began,
:meth:`~.objective.Objective.weight`). So a round is stable when:

- no elastic job the goodput source knows, no guest running, no co-tenancy offered;
- either every running job is pinned or protected (no off column: a waiting job can only
  start on free GPUs, where none fitted, and a waiting job's value only rises), or no
  waiting job's discount moves (never started, with a free launch), so every column's cost
  stays what it is, or the answer holds at the moving prices' limit (below);
- no running job is starving beside a waiting one that starves (the longest waiters run
  first, and only the waiting ones' waits grow);
- with aging on (``wait_weight``) and a running job that may be evicted while jobs wait,
  the answer holds with every waiting job priced as it will be a few hours on at most (its
  weight then, discount 1); the quiet spell then ends there (:data:`AGING_HORIZONS_S`).

A waiting job that has run before gets cheaper to start as it ages: its discount,
``max(age - restarts x r, 0) / (age + r)``, rises towards 1 and nothing else of its price
moves. So the round is solved once more with every such job priced at discount 1, the
cheapest it can ever be: if the dynamic program then chooses the same columns, it chooses
them at every price in between (a solution that starts a moving job only gets dearer as its
discount falls back from 1, and one that does not is priced as it is now; the program's tie
rule keeps its answer when off-answer options only get dearer). On Philly this was the
reason for most rounds asked again (a profiler's diagnosis; the published effect is
philly-low's cycle count in docs/BENCHMARKS.md).

Then the answer holds until a protection or hold ends, the longest job's protection lapses
(:mod:`.longest_job`), a waiting job starts starving, a
restarted job's discount leaves zero, or a back-off ends; with nothing waiting, until the
next arrival or finish. ``None`` otherwise: ask every round. tests/core/simulator/
test_simulator_skip.py replays with and without the skip and compares the decision logs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from jigsaw.model.domain import Job
from jigsaw.model.snapshot import Snapshot
from jigsaw.policies.allocator.configurations import OFF, Problem
from jigsaw.policies.allocator.objective import Objective
from jigsaw.policies.allocator.row_memo import held_since
from jigsaw.policies.allocator.solve import chosen_columns, solve_exclusive
from jigsaw.policies.shared.cost_curve import Flat
from jigsaw.policies.shared.program_memo import ProgramMemo


def stable_until(
    problem: Problem,
    chosen: Sequence[int],
    snapshot: Snapshot,
    objective: Objective,
    memo: ProgramMemo | None = None,
) -> float | None:
    """The earliest time the answer ``chosen`` to ``problem`` (the round solved at
    ``snapshot`` under ``objective``) could change without an arrival or finish; ``None``:
    it may change any round. ``memo``: the size program's last run (the round's own: the
    limit-price program shares its running jobs, and reads it without replacing it)."""
    if problem.cotenancy_offered:
        return None
    # The limit-price programs resume from the round's run and leave it for the next round.
    memo = memo.trial() if memo is not None else None
    evictable = starving_runs = moving_prices = starving_waits = waits = False
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
            waits = True
            moving_prices = moving_prices or _discount_moves(job, objective)
            starving_waits = starving_waits or objective.starving(job)
    if starving_runs and starving_waits:
        return None
    until = math.inf
    if evictable and waits and objective.config.wait_weight > 0:
        # Aging: the waiting jobs' weights grow every round, without a limit.
        aged = _aging_horizon(problem, chosen, objective, memo)
        if aged is None:
            return None
        until = aged
    elif (
        evictable
        and moving_prices
        and not _holds_at_limit_prices(problem, chosen, objective, memo=memo)
    ):
        return None
    retry = snapshot.next_retry_at
    return min(until, _crossings(problem, objective), retry if retry is not None else math.inf)


AGING_HORIZONS_S = (14_400.0, 3_600.0, 900.0)
"""How far ahead a quiet round under aging is checked, longest first."""


def _aging_horizon(
    problem: Problem, chosen: Sequence[int], objective: Objective, memo: ProgramMemo | None
) -> float | None:
    """Under aging, the latest of ``now`` plus each of :data:`AGING_HORIZONS_S` at which
    the answer holds with every waiting job priced as it will be then at most (its weight
    then, discount 1): its gain by running only grows on the way, so an answer that holds
    there holds at every moment before. ``None``: none of them holds."""
    now = objective.now
    for horizon in AGING_HORIZONS_S:
        later = dataclasses.replace(objective, now=now + horizon)
        if _holds_at_limit_prices(problem, chosen, objective, weights_at=later, memo=memo):
            return now + horizon
    return None


def _holds_at_limit_prices(
    problem: Problem,
    chosen: Sequence[int],
    objective: Objective,
    *,
    weights_at: Objective | None = None,
    memo: ProgramMemo | None = None,
) -> bool:
    """The dynamic program keeps ``chosen`` with every waiting job whose discount moves
    priced at discount 1 (the supremum its age tends to); with ``weights_at`` (aging), every
    waiting job so, and weighted as it is at that objective's moment."""
    flat = problem.flat if problem.exclusive_only else None
    columns = list(problem.columns) if flat is None else problem.columns
    costs = flat.costs.copy() if flat is not None else None
    for index, view in enumerate(problem.views):
        if view.current:
            continue
        if weights_at is None and not _discount_moves(view.job, objective):
            continue
        weight = (weights_at if weights_at is not None else objective).weight(view.job)
        for column_index in problem.by_job[index]:
            column = columns[column_index]
            if column.kind != OFF:
                cost = objective.term(weight, 1.0, column.speedup, changed=True)
            elif weights_at is not None:  # waiting costs more too, at the higher weight
                cost = objective.term(weight, 1.0, column.speedup, changed=False)
            else:
                continue
            if costs is not None:
                costs[column_index] = cost
            else:
                columns[column_index] = column._replace(cost=cost)
    if flat is not None and costs is not None:
        # The round's own columns as its program read them, repriced.
        repriced = Flat(flat.sizes, costs, flat.counts)
        return chosen_columns(repriced, problem.capacity, memo) == list(chosen)
    limit = dataclasses.replace(problem, columns=columns)
    return solve_exclusive(limit, memo).chosen == list(chosen)


def _discount_moves(job: Job, objective: Objective) -> bool:
    """The waiting job's discount changes with its age (:meth:`Objective.discount`): it has
    run before and restarts cost time, or its launch does."""
    if job.attempt == 0:
        return objective.config.launch_s > 0
    return objective.restart_s(job) > 0


def _crossings(problem: Problem, objective: Objective) -> float:
    """The first moment after now at which a pin, protection or price changes by itself: a
    hold or minimum run ends, the longest job stops being critical, a waiting job starts
    starving, a restarted job's discount leaves zero."""
    config, now = objective.config, objective.now
    found = problem.stable_by_clock_until
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
