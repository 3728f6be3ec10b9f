"""Pick one column per job: the exact dynamic program, or HiGHS when co-tenancy is offered.

Without guest columns the problem separates: the summed cost of each job's exclusive size is
minimised under one GPU budget, which :func:`~jigsaw.policies.shared.pollux_allocation.
choose_options` solves exactly (the same program pollux runs). With guest columns the
choices couple (a guest needs its host's column chosen, one guest per slot), and the round is
a 0-1 program solved by SciPy's HiGHS (``scipy.optimize.milp``) under a time limit and a
relative gap:

    minimise   sum_c cost_c x_c
    subject to sum_{c of j} x_c = 1                  for every job j
               sum_c gpus_c x_c <= GPUs
               sum_{guests g on slot s of c} x_g <= x_c   for every offered slot

The exclusive optimum is a feasible point of that program, so the answer kept is whichever
of the two costs less: HiGHS stopping early never does worse than pollux's choice.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_array

from jigsaw.policies.allocator.configurations import GUEST, Problem, size_costs
from jigsaw.policies.shared.pollux_allocation import choose_options

_IMPROVEMENT = 1e-9


@dataclass(frozen=True, slots=True)
class Solution:
    chosen: list[int]
    """The column chosen for each job."""
    cost: float
    solver: str
    """``dp`` or ``highs``."""


def solve_exclusive(problem: Problem) -> Solution:
    options = [size_costs(problem, job) for job in range(len(problem.views))]
    picks = choose_options([(sizes, costs) for sizes, costs, _ in options], problem.capacity)
    chosen = [indices[pick] for (_, _, indices), pick in zip(options, picks, strict=True)]
    return Solution(chosen, _cost(problem, chosen), "dp")


def solve(problem: Problem, time_limit_s: float, rel_gap: float) -> Solution:
    exclusive = solve_exclusive(problem)
    if not any(column.kind == GUEST for column in problem.columns):
        return exclusive
    joint = _solve_milp(problem, time_limit_s, rel_gap)
    if joint is not None and joint.cost < exclusive.cost - _IMPROVEMENT * abs(exclusive.cost):
        return joint
    return exclusive


def _solve_milp(problem: Problem, time_limit_s: float, rel_gap: float) -> Solution | None:
    columns = problem.columns
    count = len(columns)
    rows: list[int] = []
    cols: list[int] = []
    values: list[float] = []
    lower: list[float] = []
    upper: list[float] = []
    row = 0
    for indices in problem.by_job:
        for index in indices:
            rows.append(row)
            cols.append(index)
            values.append(1.0)
        lower.append(1.0)
        upper.append(1.0)
        row += 1
    for index, column in enumerate(columns):
        if column.gpus:
            rows.append(row)
            cols.append(index)
            values.append(float(column.gpus))
    lower.append(0.0)
    upper.append(float(problem.capacity))
    row += 1
    slots: dict[tuple[int, object], list[int]] = {}
    for index, column in enumerate(columns):
        if column.kind == GUEST and column.needs is not None:
            slots.setdefault((column.needs, column.slot), []).append(index)
    for (needs, _), guests in slots.items():
        for index in guests:
            rows.append(row)
            cols.append(index)
            values.append(1.0)
        rows.append(row)
        cols.append(needs)
        values.append(-1.0)
        lower.append(-np.inf)
        upper.append(0.0)
        row += 1
    matrix = coo_array((values, (rows, cols)), shape=(row, count)).tocsr()
    costs = np.array([column.cost for column in columns])
    result = milp(
        costs,
        constraints=LinearConstraint(matrix, np.array(lower), np.array(upper)),
        integrality=np.ones(count),
        bounds=Bounds(0.0, 1.0),
        options={"time_limit": time_limit_s, "mip_rel_gap": rel_gap, "disp": False},
    )
    if result.x is None:
        return None
    x = np.round(result.x)
    chosen: list[int] = []
    for indices in problem.by_job:
        picked = [index for index in indices if x[index] > 0.5]
        if len(picked) != 1:
            return None
        chosen.append(picked[0])
    return Solution(chosen, _cost(problem, chosen), "highs")


def _cost(problem: Problem, chosen: list[int]) -> float:
    return float(sum(problem.columns[index].cost for index in chosen))
