"""Whether guests could pay this round: a bound on every answer with guests, from a relaxation.

:func:`guests_may_pay` tells :func:`~jigsaw.policies.allocator.solve.solve` (and, at floor
prices, :meth:`~jigsaw.policies.jigsaw.JigsawPolicy._solve` before any guest is priced)
whether some answer with guests could be kept over the exclusive optimum; when not, neither
guest pricing nor HiGHS is needed. docs/SCHEDULER.md, step 5, has the argument.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping
from collections.abc import Set as AbstractSet

import numpy as np

from jigsaw.policies.allocator.configurations import GUEST, Problem
from jigsaw.policies.allocator.solution import Solution
from jigsaw.policies.shared.cost_curve import COST_GRID, UNREACHABLE, CostCurve, Flat, _on_grid
from jigsaw.policies.shared.pollux_allocation import Infeasible, cost_curve, cost_curve_flat
from jigsaw.policies.shared.program_memo import ProgramMemo

HIGHS_TOLERANCE = 1e-9
"""HiGHS's own relative tolerance: the slack of the 0-1 program's goodput and completion
rows, and part of the margin a joint answer must win by."""
_ROUNDING = 1e-12

SizeOptions = list[tuple[np.ndarray, np.ndarray, list[int]]]
"""Each job's cheapest column of each GPU count: (sizes, costs, column indices)."""


class ExclusiveRound:
    """The exclusive optimum and the options it chose among. Guest columns change neither
    (the dynamic program leaves them out), so it holds while guests are priced.

    Its options are each job's cheapest column of each GPU count: given per job
    (``options``), or, for a problem of off and exclusive columns only, as the columns stand,
    flat (``flat``: every column's GPUs and cost, before the grid; each job's slice is read
    only where a check asks for that job, and the curve over the other jobs is taken from
    the flat arrays whole)."""

    __slots__ = ("_flat", "_options", "_others", "_starts", "curve_memo", "solution")

    def __init__(
        self,
        options: SizeOptions | None,
        solution: Solution,
        curve_memo: ProgramMemo | None = None,
        *,
        flat: Flat | None = None,
    ) -> None:
        """``curve_memo``: passes kept by the policy (the round's own size program, read as a
        trial) that the curve over the jobs outside the candidates resumes from (the same
        curve, for the passes of the jobs after the first that differs)."""
        if (options is None) == (flat is None):
            raise ValueError("an exclusive round takes its options per job or flat, not both")
        self._options = options
        self._flat = flat
        self._starts = flat.starts().tolist() if flat is not None else []
        self.solution = solution
        self.curve_memo = curve_memo
        self._others: list[tuple[frozenset[int], CostCurve]] = []
        """Curves of the size program over every job outside a set of guest candidates, kept
        so a round's two checks (at floor prices, then at the guests' own) share one pass."""

    @property
    def jobs(self) -> int:
        return len(self._options) if self._options is not None else len(self._starts)

    def job_options(self, job: int) -> tuple[np.ndarray, np.ndarray]:
        """The job's (sizes ascending, costs)."""
        if self._options is not None:
            sizes, costs, _ = self._options[job]
            return sizes, costs
        assert self._flat is not None
        start = self._starts[job]
        end = start + int(self._flat.counts[job])
        return self._flat.sizes[start:end], self._flat.costs[start:end]

    def curve_without(
        self, problem: Problem, candidates: AbstractSet[int]
    ) -> tuple[frozenset[int], CostCurve]:
        """A curve over every job outside a set that holds ``candidates``, and that set: a
        kept one, or one built (and kept) over every job outside ``candidates``."""
        for left_out, curve in self._others:
            if candidates <= left_out:
                return left_out, curve
        left_out = frozenset(candidates)
        if self._flat is not None:
            keep = np.ones(len(self._starts), dtype=bool)
            keep[list(left_out)] = False
            others = self._flat.jobs(keep)
            # The grid taken of the kept costs, as of the per-job options concatenated.
            flat = Flat(others.sizes, _on_grid(others.costs), others.counts)
            curve = cost_curve_flat(flat, problem.capacity, self.curve_memo)
        else:
            assert self._options is not None
            listed = [
                (sizes, costs)
                for job, (sizes, costs, _) in enumerate(self._options)
                if job not in left_out
            ]
            curve = cost_curve(listed, problem.capacity, self.curve_memo)
        self._others.append((left_out, curve))
        return left_out, curve


def guests_may_pay(
    problem: Problem, exclusive: ExclusiveRound, guest_prices: Mapping[int, float]
) -> bool:
    """Whether an answer with guests could be kept over the exclusive optimum, when no guest
    column of job ``j`` costs less than ``guest_prices[j]`` (:func:`guest_bound`).

    Yes at once, without the bound's dynamic program, when the exclusive optimum changed
    by hand is a cheaper answer of the relaxation (the bound is then below it, and the 0-1
    program is asked, as it always may be): :func:`_cheaper_by_hand`."""
    if _cheaper_by_hand(problem, exclusive, guest_prices):
        return True
    cost = exclusive.solution.cost
    return guest_bound(problem, exclusive, guest_prices) < cost - margin(problem, cost)


def _cheaper_by_hand(
    problem: Problem, exclusive: ExclusiveRound, guest_prices: Mapping[int, float]
) -> bool:
    """Whether one of two changes to the exclusive optimum lowers its cost in the
    relaxation of :func:`guest_bound`: a job priced below its chosen column moves to that
    price (on a full cluster, a waiting job whose guest column costs less than waiting), or
    candidates that run give their GPUs back at their prices (the cheapest moves first),
    and with the free GPUs a waiting job starts for less than its wait and those moves
    together. Either is an answer of the relaxation, so the bound is below the exclusive
    optimum; asking HiGHS is always safe (its answer is kept only if it wins by the margin),
    so a witness costs no decision."""
    chosen, columns = exclusive.solution.chosen, problem.columns
    moves: list[tuple[float, int]] = []
    for job, price in guest_prices.items():
        kept = columns[chosen[job]]
        if price < kept.cost:
            return True
        if kept.gpus:
            moves.append((price - kept.cost, kept.gpus))
    moves.sort()
    # After the k cheapest moves: ``freed[k]`` GPUs are free, for ``paid[k]`` more cost.
    freed = [problem.capacity - sum(columns[index].gpus for index in chosen)]
    paid = [0.0]
    for cost, gpus in moves:
        freed.append(freed[-1] + gpus)
        paid.append(paid[-1] + cost)
    most = freed[-1]
    if most <= 0:
        return False
    for job in range(exclusive.jobs):
        waits = columns[chosen[job]]
        if waits.gpus or job in guest_prices:
            continue
        sizes, costs = exclusive.job_options(job)
        for size, cost in zip(sizes.tolist(), costs.tolist(), strict=True):
            if 0 < size <= most and cost + paid[bisect_left(freed, size)] < waits.cost:
                return True
    return False


def margin(problem: Problem, exclusive_cost: float) -> float:
    """How much cheaper than the exclusive optimum a joint answer must be to be kept: the
    dynamic program's resolution (its sums are exact on a grid of ``1 / COST_GRID`` per
    job, so smaller differences are ties, and a tie keeps the exclusive optimum), and a
    relative ``1e-9`` for HiGHS's own tolerance."""
    return len(problem.views) / COST_GRID + HIGHS_TOLERANCE * abs(exclusive_cost)


def cheapest_guest_columns(problem: Problem) -> dict[int, float]:
    """Each job with a guest column: the cost of its cheapest."""
    cheapest: dict[int, float] = {}
    for column in problem.columns:
        if column.kind == GUEST:
            kept = cheapest.get(column.job)
            if kept is None or column.cost < kept:
                cheapest[column.job] = column.cost
    return cheapest


def guest_bound(problem: Problem, exclusive: ExclusiveRound, guests: Mapping[int, float]) -> float:
    """A lower bound on the cost of every answer, guests included, by a relaxation: every
    job with guest columns may take its cheapest one at no GPU and no host's cost, with no
    slot, host, goodput or completion row. That is the dynamic program again, with such a
    job's no-GPU option priced at the cheaper of waiting and its cheapest guest column.
    Every answer of the 0-1 program is an answer of the relaxation that costs no more (a
    host's loss adds a cost of at least 0). The program sums costs rounded to a grid
    (``1 / COST_GRID``), each within half a step of its own, so an answer costs at least its
    grid sum less half a step per job: the program's optimum so lowered is the bound. (It
    is never below the bound before the pass was shared, the raw costs of the program's
    answer less a whole step per job.) When the bound is within the margin a joint answer
    must win by (:func:`margin`), HiGHS's answer could not be kept
    (:func:`~jigsaw.policies.allocator.solve.solve`) and is not asked for.

    The program's values over the jobs that are not guests are the same at any guest
    prices: one pass over them is kept (:meth:`ExclusiveRound.curve_without`), and each
    check adds only its candidates (at most 12) to a copy. That pass resumes from the
    round's own size program where their jobs first differ (a trial of the policy's memo,
    :meth:`~jigsaw.policies.shared.program_memo.ProgramMemo.trial`: the running jobs lead
    both, and the candidates wait, behind them).

    On a Philly week at 512 GPUs (a profiler's diagnosis) HiGHS's answer was kept in 14 of
    2,534 co-tenancy rounds: most offer slots while free GPUs remain, where a one-GPU job
    runs cheaper on a GPU of its own."""
    left_out, others = exclusive.curve_without(problem, guests.keys())
    curve = others.copy()
    for job in sorted(left_out):
        sizes, costs = exclusive.job_options(job)
        guest = guests.get(job)
        if guest is None:
            curve.add(sizes, costs)
        elif len(sizes) and sizes[0] == 0:
            cheaper = costs.copy()
            cheaper[0] = min(cheaper[0], guest)
            curve.add(sizes, cheaper)
        else:  # it may not wait: a guest column is its only no-GPU option
            curve.add(np.concatenate([[0], sizes]), np.concatenate([[guest], costs]))
    bound = curve.least()
    if not bound < UNREACHABLE:  # the exclusive problem was solved: its answer fits
        raise Infeasible("the relaxation of a solved round has no answer")
    # Less half a grid step per job, and a rounding error of a price's last digits (a floor
    # priced apart from the column it bounds).
    bound += problem.set_aside_cost
    jobs = exclusive.jobs
    return bound - jobs / (2 * COST_GRID) - _ROUNDING * abs(bound)
