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
               sum_c speedup_c x_c >= sum of the exclusive optimum's speedups

The last row is the project's rule, a job does less only where the cluster does more: a
packing may lower the objective (under p = -1 any share of a GPU looks far better than
waiting, since a job left out costs 1,000) yet lower the cluster's summed goodput, when a
host's SPB staircase loses more than its guests gain; such a packing is not taken. Without
the row a Philly fortnight packed 7,979 guests, each at a fraction of a GPU, behind hosts
slowed to their eta, and its average JCT rose sixfold.

The exclusive optimum is a feasible point of that program, so the answer kept is whichever
of the two costs less: HiGHS stopping early never does worse than pollux's choice.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_array

from jigsaw.policies.allocator.configurations import GUEST, OFF, Problem, size_costs
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
    joint = _solve_milp(problem, _touched(problem, exclusive), exclusive, time_limit_s, rel_gap)
    if joint is not None and joint.cost < exclusive.cost - _IMPROVEMENT * abs(exclusive.cost):
        return joint
    return exclusive


def _touched(problem: Problem, exclusive: Solution) -> set[int]:
    """The jobs the program re-decides: guests, every job owning a column a guest needs, and
    every job the exclusive optimum changes (its starts and preemptions compete with the
    guests for the same GPUs). Jobs it keeps as they are stay so."""
    found: set[int] = set()
    for column in problem.columns:
        if column.kind == GUEST and column.needs is not None:
            found.add(column.job)
            found.add(problem.columns[column.needs].job)
    for job, index in enumerate(exclusive.chosen):
        keep = problem.keep_column(job)
        column = problem.columns[index]
        if index != keep and not (keep is None and column.kind == OFF):
            found.add(job)
    return found


def _solve_milp(
    problem: Problem,
    touched: set[int],
    exclusive: Solution,
    time_limit_s: float,
    rel_gap: float,
) -> Solution | None:
    """The 0-1 program over the ``touched`` jobs; every other job keeps its column of the
    exclusive optimum, and the GPUs those take are not offered (so the exclusive optimum stays
    feasible, and at 2,000 jobs HiGHS sees a few hundred columns, not thousands)."""
    columns = problem.columns
    count = len(columns)
    fixed = {exclusive.chosen[job] for job in range(len(problem.views)) if job not in touched}
    rows: list[int] = []
    cols: list[int] = []
    values: list[float] = []
    lower: list[float] = []
    upper: list[float] = []
    row = 0
    for job, indices in enumerate(problem.by_job):
        if job not in touched:
            indices = [exclusive.chosen[job]]
        for index in indices:
            rows.append(row)
            cols.append(index)
            values.append(1.0)
        lower.append(1.0)
        upper.append(1.0)
        row += 1
    for index, column in enumerate(columns):
        if column.gpus and (column.job in touched or index in fixed):
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
    floor = 0.0
    for job, index in enumerate(exclusive.chosen):
        if job in touched:
            floor += columns[index].speedup
    for index, column in enumerate(columns):
        if column.job in touched and column.speedup:
            rows.append(row)
            cols.append(index)
            values.append(column.speedup)
    lower.append(floor * (1.0 - _IMPROVEMENT))
    upper.append(np.inf)
    row += 1
    matrix = coo_array((values, (rows, cols)), shape=(row, count)).tocsr()
    costs = np.array([column.cost for column in columns])
    live = np.array(
        [column.job in touched or index in fixed for index, column in enumerate(columns)]
    )
    result = milp(
        costs,
        constraints=LinearConstraint(matrix, np.array(lower), np.array(upper)),
        integrality=np.ones(count),
        bounds=Bounds(0.0, live.astype(np.float64)),
        options={"time_limit": time_limit_s, "mip_rel_gap": rel_gap, "disp": False},
    )
    if result.x is None:
        return None
    x = np.round(result.x)
    chosen: list[int] = []
    for indices in problem.by_job:  # a job not touched has its fixed column at 1
        picked = [index for index in indices if x[index] > 0.5]
        if len(picked) != 1:
            return None
        chosen.append(picked[0])
    return Solution(chosen, _cost(problem, chosen), "highs")


def _cost(problem: Problem, chosen: list[int]) -> float:
    return float(sum(problem.columns[index].cost for index in chosen))
