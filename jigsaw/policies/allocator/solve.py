"""Pick one column per job: the exact dynamic program, or HiGHS when co-tenancy is offered.

Without guest columns the problem separates: the summed cost of each job's exclusive size is
minimised under one GPU budget, which :func:`~jigsaw.policies.shared.pollux_allocation.
choose_options` solves exactly (the same program pollux runs). With guest columns the
choices couple (a guest needs its host's column chosen, one guest per slot), and the round is
a 0-1 program solved by SciPy's HiGHS (``scipy.optimize.milp``) under a node limit (a
time limit far above it only as a safety net, so the answer does not depend on the machine)
and a relative gap:

    minimise   sum_c cost_c x_c + sum_h C_h
    subject to sum_{c of j} x_c = 1                  for every job j
               sum_c gpus_c x_c <= GPUs
               sum_{guests g on slot s of c} x_g <= x_c   for every offered slot
               L_h >= host_loss_g x_g,  C_h >= host_cost_g x_g   for every guest g of host h
               sum_c speedup_c x_c - sum_h L_h >= sum of the exclusive optimum's speedups
               sum_c pace_c speedup_c x_c - sum_h pace_h L_h >= the same at the optimum

``L_h`` and ``C_h`` (continuous, at least 0) are what a host column ``h`` loses to its
guests' turns, in speedup and in the host's term: a gang runs at its slowest GPU, so it pays
the worst of its guests' losses, once. The last row is the completion guard
(``completion_guard``): ``pace_j`` is ``1 / (speedup at the size j asked for x its remaining
seconds there)``, so the row is the touched jobs' completion rate, whose greedy maximum is
SRPT; a guest with more work left than its host has is not packed beside it.

The goodput row (the one before the guard) is the project's rule, a job does less only where
the cluster does more: a packing may lower the objective (under a negative power any share of
a GPU looks far better than waiting: a job left out costs 31.6 at p = -0.5, 1,000 at -1) yet
lower the cluster's summed goodput, when a host loses more than its guests gain (to an SPB
staircase's eta, or to the guests' turns on its GPUs); such a packing is not taken. Without
the row a Philly fortnight packed 7,979 guests, each at a fraction of a GPU, behind hosts
slowed to their eta, and its average JCT rose sixfold; with the row but without the hosts'
losses in it, guests still slowed big gangs more than they gained, and Philly-low ran 3%
better with guests switched off.

The exclusive optimum is a feasible point of that program, so the answer kept is whichever
of the two costs less: HiGHS stopping early never does worse than pollux's choice. HiGHS is
not asked where a Lagrangian bound over the re-decided jobs shows that no answer of the
program could be kept (:mod:`.joint_bound`).
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_array

from jigsaw.policies.allocator.configurations import GUEST, OFF, Problem, size_costs
from jigsaw.policies.allocator.guest_bound import (
    HIGHS_TOLERANCE,
    ExclusiveRound,
    SizeOptions,
    cheapest_guest_columns,
    guests_may_pay,
    margin,
)
from jigsaw.policies.allocator.joint_bound import program_may_pay, rows_hold
from jigsaw.policies.allocator.solution import Solution
from jigsaw.policies.shared.cost_curve import Flat, _on_grid
from jigsaw.policies.shared.pollux_allocation import choose_flat, choose_options
from jigsaw.policies.shared.program_memo import ProgramMemo


def solve_exclusive(problem: Problem, memo: ProgramMemo | None = None) -> Solution:
    """The exclusive optimum. A problem of off and exclusive columns only is handed to the
    size program as its columns stand, flat (one pass, not one per job)."""
    if not problem.exclusive_only:
        return _solve_exclusive(problem, _size_options(problem), memo)
    return _solve_flat(problem, memo)[0]


def _solve_flat(problem: Problem, memo: ProgramMemo | None) -> tuple[Solution, Flat]:
    """:func:`solve_exclusive` of a problem of off and exclusive columns only, and every
    column's GPUs and cost as it stands (before the grid), job by job."""
    columns = problem.columns
    counts = np.fromiter(map(len, problem.by_job), np.int64, len(problem.by_job))
    sizes = np.fromiter((column.gpus for column in columns), np.int64, len(columns))
    costs = np.fromiter((column.cost for column in columns), np.float64, len(columns))
    problem.flat = Flat(sizes, costs, counts)
    chosen = chosen_columns(problem.flat, problem.capacity, memo)
    return Solution(chosen, _cost(problem, chosen), "dp"), problem.flat


def chosen_columns(flat: Flat, capacity: int, memo: ProgramMemo | None = None) -> list[int]:
    """The size program over every column of ``flat`` (costs as they stand, put on the grid
    here): the index of each job's chosen column."""
    on_grid = Flat(flat.sizes, _on_grid(flat.costs), flat.counts)
    picks = choose_flat(on_grid, capacity, memo)
    chosen: list[int] = (on_grid.starts() + np.array(picks, dtype=np.int64)).tolist()
    return chosen


def solve_exclusive_round(
    problem: Problem, memo: ProgramMemo | None = None, curve_memo: ProgramMemo | None = None
) -> ExclusiveRound:
    """``memo``: the size program's last run, kept by the caller between rounds (the same
    answer, for less work: :mod:`~jigsaw.policies.shared.program_memo`); ``curve_memo``: the
    guest bound's curve's (:meth:`ExclusiveRound.curve_without`; a trial of ``memo``, which
    then resumes from this round's program, whose jobs lead the curve's)."""
    if not problem.exclusive_only:
        cheapest = _size_options(problem)
        return ExclusiveRound(cheapest, _solve_exclusive(problem, cheapest, memo), curve_memo)
    # Off and exclusive columns only, consecutive: each job's options are its columns as they
    # stand, and the program runs over them flat (:func:`solve_exclusive`, the same answer).
    solution, flat = _solve_flat(problem, memo)
    return ExclusiveRound(None, solution, curve_memo, flat=flat)


def _size_options(problem: Problem) -> SizeOptions:
    """Each job's cheapest column of each GPU count (:func:`size_costs`)."""
    all_costs = np.fromiter((column.cost for column in problem.columns), np.float64)
    return [size_costs(problem, job, all_costs) for job in range(len(problem.views))]


def _solve_exclusive(
    problem: Problem, options: SizeOptions, memo: ProgramMemo | None = None
) -> Solution:
    pairs = [(sizes, costs) for sizes, costs, _ in options]
    picks = choose_options(pairs, problem.capacity, memo)
    chosen = [indices[pick] for (_, _, indices), pick in zip(options, picks, strict=True)]
    return Solution(chosen, _cost(problem, chosen), "dp")


@dataclass(frozen=True, slots=True)
class SolverLimits:
    """HiGHS' limits: ``nodes`` bounds its work (a count: the same answer on any machine),
    ``time_s`` is a safety net above it, ``rel_gap`` the optimality gap it may stop at."""

    nodes: int
    time_s: float
    rel_gap: float


def solve(
    problem: Problem,
    limits: SolverLimits,
    exclusive_round: ExclusiveRound | None = None,
    memo: ProgramMemo | None = None,
) -> Solution:
    """``exclusive_round``: the exclusive optimum, when the caller solved it already;
    ``memo``: else the size program's last run (:func:`solve_exclusive_round`)."""
    guests = cheapest_guest_columns(problem)
    if exclusive_round is None:
        if not guests:
            return solve_exclusive(problem, memo)
        exclusive_round = solve_exclusive_round(problem, memo)
    exclusive = exclusive_round.solution
    if not guests or not guests_may_pay(problem, exclusive_round, guests):
        return exclusive
    touched = _touched(problem, exclusive)
    target = exclusive.cost - margin(problem, exclusive.cost)
    if not program_may_pay(problem, touched, exclusive, target):
        return exclusive  # no answer of the program could be kept (:mod:`.joint_bound`)
    joint = _solve_milp(problem, touched, exclusive, limits)
    if joint is None or not joint.cost < target:
        return exclusive
    return joint if rows_hold(problem, touched, exclusive, joint.chosen) else exclusive


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
    limits: SolverLimits,
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
    hosts = sorted({needs for needs, _ in slots})
    loss_of = {needs: count + 2 * k for k, needs in enumerate(hosts)}  # L_h; C_h follows it
    for needs in hosts:
        rows.append(row)
        cols.append(loss_of[needs])
        values.append(-1.0)
    lower.append(floor * (1.0 - HIGHS_TOLERANCE))
    upper.append(np.inf)
    row += 1
    if problem.pace:
        added = _completion_row(problem, touched, exclusive, loss_of, (rows, cols, values), row)
        if added > row:
            lower.append(1.0 - HIGHS_TOLERANCE)
            upper.append(np.inf)
            row = added
    for index, column in enumerate(columns):
        if column.kind != GUEST or column.needs is None:
            continue
        for offset, amount in ((0, column.host_loss), (1, column.host_cost)):
            rows.extend((row, row))
            cols.extend((loss_of[column.needs] + offset, index))
            values.extend((1.0, -amount))
            lower.append(0.0)
            upper.append(np.inf)
            row += 1
    # The last variable, fixed at 1, carries the set-aside jobs' cost: HiGHS's relative gap
    # is then taken of the same total as in a round over every job.
    width = count + 2 * len(hosts) + 1
    matrix = coo_array((values, (rows, cols)), shape=(row, width)).tocsr()
    costs = np.array(
        [column.cost for column in columns] + [0.0, 1.0] * len(hosts) + [problem.set_aside_cost]
    )
    live = np.array(
        [column.job in touched or index in fixed for index, column in enumerate(columns)]
    )
    upper_bounds = np.concatenate([live.astype(np.float64), np.full(2 * len(hosts), np.inf), [1]])
    with _solver_prints_to_stderr():
        result = milp(
            costs,
            constraints=LinearConstraint(matrix, np.array(lower), np.array(upper)),
            integrality=np.concatenate([np.ones(count), np.zeros(2 * len(hosts) + 1)]),
            bounds=Bounds(np.concatenate([np.zeros(width - 1), [1.0]]), upper_bounds),
            options={
                "node_limit": limits.nodes,
                "time_limit": limits.time_s,
                "mip_rel_gap": limits.rel_gap,
                "disp": False,
            },
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


def _completion_row(
    problem: Problem,
    touched: set[int],
    exclusive: Solution,
    loss_of: dict[int, int],
    entries: tuple[list[int], list[int], list[float]],
    row: int,
) -> int:
    """The completion guard's row: the touched jobs' completion rate, each column's speedup
    at its job's pace, less each host's loss at the host's pace (the losses' variables
    ``L_h``), at least the exclusive optimum's. Rates are a few per hour, far below HiGHS's
    feasibility tolerance, so the row is divided by the optimum's rate (its bound is then 1).
    Returns the next row."""
    rows, cols, values = entries
    columns, pace = problem.columns, problem.pace
    floor = sum(columns[exclusive.chosen[job]].speedup * pace[job] for job in touched)
    if floor <= 0:
        return row  # nothing of the optimum's completes: a pack cannot lower its rate
    for index, column in enumerate(columns):
        if column.job in touched and column.speedup and pace[column.job]:
            rows.append(row)
            cols.append(index)
            values.append(column.speedup * pace[column.job] / floor)
    for needs, variable in loss_of.items():
        rows.append(row)
        cols.append(variable)
        values.append(-pace[columns[needs].job] / floor)
    return row + 1


def _cost(problem: Problem, chosen: list[int]) -> float:
    """The objective of ``chosen``: its columns' costs, and each host's worst guest's loss."""
    columns = problem.columns
    worst: dict[int, float] = {}
    for index in chosen:
        column = columns[index]
        if column.kind == GUEST and column.needs is not None:
            worst[column.needs] = max(worst.get(column.needs, 0.0), column.host_cost)
    chosen_cost = sum(columns[index].cost for index in chosen) + sum(worst.values())
    return float(chosen_cost + problem.set_aside_cost)


_REDIRECT = threading.Lock()


@contextmanager
def _solver_prints_to_stderr() -> Iterator[None]:
    """HiGHS (inside SciPy) ``printf``s a debug line to the process's standard output on some
    problems (``HighsMipSolverData::transformNewIntegerFeasibleSolution tmpSolver.run();``),
    which broke ``jigsaw-cli simulate -o json``. While it solves, file descriptor 1 points at
    standard error, and C's buffer is flushed before it is given back."""
    with _REDIRECT:
        sys.stdout.flush()
        saved = os.dup(1)
        try:
            os.dup2(2, 1)
            yield
        finally:
            _flush_c_stdio()
            os.dup2(saved, 1)
            os.close(saved)


@functools.cache
def _c_library() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(None)
    except OSError:  # no C library to load by that name (not on Linux or macOS)
        return None


def _flush_c_stdio() -> None:
    library = _c_library()
    if library is not None:
        library.fflush(None)
