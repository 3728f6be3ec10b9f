"""Whether the 0-1 program could beat the exclusive optimum: a Lagrangian bound over the jobs
it re-decides, asked before HiGHS.

:func:`~jigsaw.policies.allocator.solve.solve` asks HiGHS only after
:func:`~.guest_bound.guests_may_pay` found that guests could pay in a relaxation over every
job. That relaxation drops the program's slot, host, goodput and completion rows; on full
Philly HiGHS was then asked 8,812 times and its answer kept 101 times, and the losing
programs took most of its 80 s of CPU (each a few dozen columns whose LP relaxation lies
5-15% below the optimum, so HiGHS works at its root node for tenths of a second).

The program (:func:`~.solve._solve_milp`) fixes every job it does not re-decide at its
column of the exclusive optimum, so a bound on its answers needs only the re-decided jobs
(``touched``), on the GPUs the fixed ones leave. For multipliers ``lam, mu >= 0`` on the
goodput row (``G(x) >= F``) and the completion row (``H(x) >= 1``), every answer ``x`` of
the program costs at least

    cost(x) - lam (G(x) - F) - mu (H(x) - 1)

and that is bounded below by a dynamic program over the touched jobs (the exclusive one's,
with each column priced ``cost - (lam + mu pace_j / F2) speedup``), once each guest
column carries its share of what it makes its host pay. A host ``h`` with guests pays, once,
the worst guest's loss (``C_h``, and ``L_h`` in the two rows, at the host job's multiplier
``k_h``), and it must choose its own column ``h`` (at least ``delta_h`` above its job's
cheapest column of the same size). At most ``S_h`` guests sit on ``h`` (its slots, and the
jobs that may be guests there), so each may carry ``(host_cost + k_h host_loss + delta_h)
/ S_h``: their sum is never above what ``h`` pays. A guest job's no-GPU option is then the
cheaper of waiting and its cheapest guest column so priced.

The bound is the program's optimum over that relaxation, less half a grid step per job (the
dynamic program's rounding), for every answer whose rows hold to their own slack
(``HIGHS_TOLERANCE``, relative). HiGHS's answer is kept only if, rounded, it is such an
answer (:func:`rows_hold`; its own tolerances would let a row fall short by more) and costs
less than the exclusive optimum by the margin (:func:`~.guest_bound.margin`). When the bound
reaches that, no answer could be kept, and HiGHS is not asked: the round's answer is the
same as if it had been.

The multipliers: ``lam = mu = 0`` first, then a golden-section search on ``log10 lam``
(the bound is concave in each multiplier, so unimodal), then on ``log10 mu`` at the best
``lam`` and on ``lam`` again, stopping at the first that settles the round: at most
:data:`MOST_TRIES` passes of the dynamic program over a few dozen jobs, each a tenth of a
millisecond. On the full-Philly replay it settles 8,328 of the 8,812 programs (94.5%):
HiGHS runs 484 times for 19.3 s of CPU instead of 80 s, and the bound costs 6.2 s (a
profiler's diagnosis of session 25); the decisions are the same.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from jigsaw.policies.allocator.configurations import GUEST, Problem
from jigsaw.policies.allocator.guest_bound import HIGHS_TOLERANCE
from jigsaw.policies.allocator.solution import Solution
from jigsaw.policies.shared.cost_curve import COST_GRID, UNREACHABLE
from jigsaw.policies.shared.pollux_allocation import cost_curve

_LAM_RANGE = (-1.0, 7.0)
_MU_RANGE = (0.0, 5.0)
"""log10 of the multipliers searched (a cost per unit of speedup; a cost per unit of the
normalised completion rate). The goodput row's multiplier is often best near ``10**5.5``:
a round whose guests would only trade goodput away is settled there (an instrumented replay
of a 512-GPU Philly fortnight: 29 of the 120 programs a range ending at ``10**5`` left to
HiGHS; tests/core/policies/test_joint_bound.py holds the bound valid over the range)."""
_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0
_STEPS = (8, 5, 6)
"""Golden-section steps: on ``lam``, on ``mu``, on ``lam`` again."""
MOST_TRIES = 1 + sum(steps + 2 for steps in _STEPS)
"""The most dynamic programs one check runs."""


@dataclass(frozen=True, slots=True)
class _Job:
    """A touched job's columns, guests aside, as arrays; its guest columns apart."""

    sizes: np.ndarray
    """The distinct GPU counts of its columns, ascending."""
    group: np.ndarray
    """Per column, its size's place in ``sizes``."""
    costs: np.ndarray
    speedups: np.ndarray
    pace: float
    guests: list[int]
    """Its guest columns (indices into the problem's)."""


class _Relaxation:
    """The touched jobs' program, priced at any multipliers."""

    def __init__(self, problem: Problem, touched: set[int], exclusive: Solution) -> None:
        columns = problem.columns
        self.problem = problem
        self.order = sorted(touched)
        self.capacity = problem.capacity
        self.constant = problem.set_aside_cost
        for job, index in enumerate(exclusive.chosen):
            if job not in touched:
                self.capacity -= columns[index].gpus
                self.constant += columns[index].cost
        pace = problem.pace
        self.goodput_floor, self.completion_floor = _floors(problem, self.order, exclusive)
        self.jobs: dict[int, _Job] = {}
        slots: dict[int, set[object]] = {}
        guest_jobs: dict[int, set[int]] = {}
        self.position: dict[int, tuple[int, int]] = {}
        """A column's job and its place among that job's columns, guests aside."""
        for job in self.order:
            own = [index for index in problem.by_job[job] if columns[index].kind != GUEST]
            guests = [index for index in problem.by_job[job] if columns[index].kind == GUEST]
            gpus = np.array([columns[index].gpus for index in own], dtype=np.int64)
            sizes, group = np.unique(gpus, return_inverse=True)
            for place, index in enumerate(own):
                self.position[index] = (job, place)
            self.jobs[job] = _Job(
                sizes,
                group,
                np.array([columns[index].cost for index in own]),
                np.array([columns[index].speedup for index in own]),
                pace[job] if pace and self.completion_floor > 0 else 0.0,
                guests,
            )
            for index in guests:
                needs = columns[index].needs
                assert needs is not None
                slots.setdefault(needs, set()).add(columns[index].slot)
                guest_jobs.setdefault(needs, set()).add(job)
        self.sharers = {needs: min(len(slots[needs]), len(guest_jobs[needs])) for needs in slots}
        """Per host column, the most guests it can hold at once."""
        self.speedup_total = sum(
            float(np.abs(entry.speedups).max(initial=0.0)) for entry in self.jobs.values()
        ) + sum(
            abs(columns[index].speedup) for job in self.order for index in self.jobs[job].guests
        )
        """Every touched job's largest speedup, summed: how large the multiplied speedups
        in a bound may grow (for its float error)."""

    def bound(self, lam: float, mu: float) -> float:
        """A lower bound on every answer of the program, at multipliers ``lam`` on the goodput
        row and ``mu`` on the completion row."""
        if self.capacity < 0:
            return -math.inf
        columns = self.problem.columns
        completion = self.completion_floor
        if completion <= 0:
            mu = 0.0
        factor: dict[int, float] = {}
        adjusted: dict[int, np.ndarray] = {}
        least: dict[int, np.ndarray] = {}
        for job, entry in self.jobs.items():
            weight = lam + (mu * entry.pace / completion if mu else 0.0)
            factor[job] = weight
            prices = entry.costs - weight * entry.speedups if weight else entry.costs
            adjusted[job] = prices
            cheapest = np.full(len(entry.sizes), np.inf)
            np.minimum.at(cheapest, entry.group, prices)
            least[job] = cheapest
        options: list[tuple[np.ndarray, np.ndarray]] = []
        for job, entry in self.jobs.items():
            sizes, costs = entry.sizes, least[job]
            guest_price = math.inf
            for index in entry.guests:
                column = columns[index]
                needs = column.needs
                assert needs is not None
                host, place = self.position[needs]
                host_entry = self.jobs[host]
                above = float(
                    adjusted[host][place] - least[host][host_entry.group[place]]
                )  # what choosing the host's column costs it over its cheapest of that size
                share = column.host_cost + factor[host] * column.host_loss + above
                price = column.cost - factor[job] * column.speedup + share / self.sharers[needs]
                guest_price = min(guest_price, price)
            if guest_price < math.inf:
                if len(sizes) and sizes[0] == 0:
                    costs = costs.copy()
                    costs[0] = min(costs[0], guest_price)
                else:
                    sizes = np.concatenate([[0], sizes])
                    costs = np.concatenate([[guest_price], costs])
            options.append((sizes, costs))
        value = cost_curve(options, self.capacity).least()
        if not value < UNREACHABLE:
            return -math.inf  # no answer fits (the exclusive optimum does): ask HiGHS
        # The float error of the prices and sums grows with the multipliers' scale.
        scale = abs(value) + lam * (self.goodput_floor + self.speedup_total) + mu
        value += self.constant
        value += lam * self.goodput_floor * (1.0 - HIGHS_TOLERANCE)
        if completion > 0:
            value += mu * (1.0 - HIGHS_TOLERANCE)
        # Less half a grid step per job, and a rounding error of the last digits.
        return value - len(options) / (2 * COST_GRID) - 1e-12 * (abs(value) + scale)


def rows_hold(problem: Problem, touched: set[int], exclusive: Solution, chosen: list[int]) -> bool:
    """Whether ``chosen`` meets the program's goodput and completion rows to their slack,
    each host losing the worst of its guests' losses: what :func:`program_may_pay`'s bound
    assumes of an answer."""
    columns, pace = problem.columns, problem.pace
    worst: dict[int, float] = {}
    for index in chosen:
        column = columns[index]
        if column.kind == GUEST and column.needs is not None:
            worst[column.needs] = max(worst.get(column.needs, 0.0), column.host_loss)
    order = sorted(touched)
    floor, completion_floor = _floors(problem, order, exclusive)
    goodput = sum(columns[chosen[job]].speedup for job in order) - sum(worst.values())
    if goodput < floor * (1.0 - HIGHS_TOLERANCE):
        return False
    if completion_floor <= 0:
        return True
    completion = sum(columns[chosen[job]].speedup * pace[job] for job in order) - sum(
        loss * pace[columns[needs].job] for needs, loss in worst.items()
    )
    return completion >= completion_floor * (1.0 - HIGHS_TOLERANCE)


def _floors(problem: Problem, order: list[int], exclusive: Solution) -> tuple[float, float]:
    """The exclusive optimum's summed speedup over the jobs ``order``, and its completion
    rate there (0 with no completion row: no paces, or nothing of it completes)."""
    columns, pace = problem.columns, problem.pace
    chosen = [columns[exclusive.chosen[job]] for job in order]
    goodput = sum(column.speedup for column in chosen)
    if not pace:
        return goodput, 0.0
    completion = sum(column.speedup * pace[job] for column, job in zip(chosen, order, strict=True))
    return goodput, max(completion, 0.0)


class _Settled(Exception):
    """A bound reached the target: the search stops."""


def program_may_pay(
    problem: Problem, touched: set[int], exclusive: Solution, target: float
) -> bool:
    """Whether the 0-1 program over ``touched`` (every other job at its column of
    ``exclusive``) could have an answer cheaper than ``target``; ``False`` only when some
    multipliers' bound (:class:`_Relaxation`) reaches it."""
    relaxation = _Relaxation(problem, touched, exclusive)

    def at(lam: float, mu: float) -> float:
        value = relaxation.bound(lam, mu)
        if not value < target:
            raise _Settled
        return value

    try:
        at(0.0, 0.0)
        steps_lam, steps_mu, steps_again = _STEPS
        lam = _golden(lambda x: at(10.0**x, 0.0), _LAM_RANGE, steps_lam)
        if relaxation.completion_floor > 0:
            mu = _golden(lambda x: at(10.0**lam, 10.0**x), _MU_RANGE, steps_mu)
            _golden(lambda x: at(10.0**x, 10.0**mu), _LAM_RANGE, steps_again)
    except _Settled:
        return False
    return True


def _golden(value: Callable[[float], float], bounds: tuple[float, float], steps: int) -> float:
    """Where ``value`` is highest in ``bounds`` (a unimodal function), after ``steps`` of a
    golden-section search."""
    low, high = bounds
    left, right = high - _GOLDEN * (high - low), low + _GOLDEN * (high - low)
    at_left, at_right = value(left), value(right)
    for _ in range(steps):
        if at_left > at_right:
            high, right, at_right = right, left, at_left
            left = high - _GOLDEN * (high - low)
            at_left = value(left)
        else:
            low, left, at_left = left, right, at_right
            right = low + _GOLDEN * (high - low)
            at_right = value(right)
    return left if at_left > at_right else right
