"""The first half of a Pollux round: how many GPUs each job gets
(:mod:`~jigsaw.policies.shared.pollux_placement` then chooses which ones).

Every job ``j`` has a cost ``c_j(n)`` for each size ``n`` it may run at (0 = not running),
and the round minimises ``sum_j c_j(n_j)`` subject to ``sum_j n_j <= GPUs``. The costs are
separable, so dynamic programming over (jobs, GPUs used) finds the exact optimum in
``O(jobs x GPUs x sizes)`` (:func:`choose_sizes`, :func:`choose_options`), where Pollux
searches the same space with a genetic algorithm (100 generations of 100 candidates per
round). The program's values are a :class:`~jigsaw.policies.shared.cost_curve.CostCurve`
(:func:`cost_curve` alone, for a caller that needs only the optimum's cost: jigsaw's guest
bound); a :class:`~jigsaw.policies.shared.program_memo.ProgramMemo` keeps the last run's, so a
round re-adds only the jobs that changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from jigsaw.policies.shared.cost_curve import UNREACHABLE, CostCurve, Flat
from jigsaw.policies.shared.program_memo import ProgramMemo


@dataclass(frozen=True, slots=True)
class SizeCosts:
    job_id: str
    costs: NDArray[np.float64]
    """``costs[n]``: the job's share of the objective at ``n`` GPUs (inf: not allowed)."""


def choose_sizes(jobs: Sequence[SizeCosts], capacity: int) -> dict[str, int]:
    """The sizes minimising the summed cost within ``capacity`` GPUs. Every job must allow
    size 0 (finite ``costs[0]``), so a solution always exists. Only the sizes a job allows
    (finite costs) are searched (:func:`choose_options`)."""
    options = []
    for job in jobs:
        sizes = np.flatnonzero(np.isfinite(job.costs[: capacity + 1]))
        options.append((sizes, job.costs[sizes]))
    picks = choose_options(options, capacity)
    return {
        job.job_id: int(sizes[pick])
        for job, (sizes, _), pick in zip(jobs, options, picks, strict=True)
    }


class Infeasible(ValueError):
    """No choice of the jobs' options fits the GPUs (the jobs that may not wait need more)."""


def choose_options(
    options: Sequence[tuple[NDArray[np.int64], NDArray[np.float64]]],
    capacity: int,
    memo: ProgramMemo | None = None,
) -> list[int]:
    """For each job's ``(sizes, costs)`` (sizes ascending, each with a finite cost), the index
    of the option minimising the summed cost with the summed sizes within ``capacity``:
    dynamic programming over (jobs, GPUs used) in ``O(jobs x GPUs x options per job)``.

    The program's sums are exact: costs are rounded to multiples of ``1 / COST_GRID``, and
    sums of such numbers below ``2**37`` are exact in a float. So a tie is a tie, and it is
    broken by one rule: of the optimal answers, the one that leaves later jobs out (the
    traceback takes a job's smaller option whenever an optimum does), so of jobs with equal
    costs the earlier in the list run first. (With costs as they come, a rounding error of
    one unit in the last place decided which of a backlog's equal jobs started: later ones,
    in a round of Philly's October, tests/core/policies/test_pollux_allocation.py.)

    ``memo``: the last run's curve, kept between calls (:mod:`.program_memo`): the same
    answer, for the passes of the jobs that differ from the last run's."""
    return choose_flat(Flat.of(options), capacity, memo)


def choose_flat(flat: Flat, capacity: int, memo: ProgramMemo | None = None) -> list[int]:
    """:func:`choose_options` of options already flat."""
    # A job with one option (one that may not wait, at one size) takes it: the program runs
    # over the others on the GPUs left. Its answer is the same (every sum differs by the
    # same exact constant, so every comparison, tie included, comes out the same).
    starts = flat.starts()
    single = flat.counts == 1
    forced = int(flat.sizes[starts[single]].sum())
    if forced:
        if forced > capacity:
            raise Infeasible(
                f"no choice of options fits {capacity} GPUs: the jobs that may not wait need more"
            )
        capacity -= forced
    several = np.flatnonzero(~single)
    free = several
    if len(several) >= _PRUNE_FROM:
        dominated = _dominated(flat.jobs(~single), capacity)
        free = several[~dominated]
    if len(free) == len(flat.counts):
        return _program_flat(flat, capacity, memo)
    answer = [0] * len(flat.counts)  # one option: 0; a dominated job waits (option 0, size 0)
    keep = np.zeros(len(flat.counts), dtype=bool)
    keep[free] = True
    picks = _program_flat(flat.jobs(keep), capacity, memo)
    for job, pick in zip(free.tolist(), picks, strict=True):
        answer[job] = pick
    return answer


def _program(
    options: Sequence[tuple[NDArray[np.int64], NDArray[np.float64]]],
    capacity: int,
    memo: ProgramMemo | None = None,
) -> list[int]:
    """:func:`choose_options` over every job given: the dynamic program itself."""
    return _program_flat(Flat.of(options), capacity, memo)


def _program_flat(flat: Flat, capacity: int, memo: ProgramMemo | None = None) -> list[int]:
    if memo is not None:
        best, picks = memo.run(flat, capacity)
    else:
        curve = CostCurve(capacity)
        picks = np.zeros((len(flat.counts), capacity + 1), dtype=np.int32)
        for index, (sizes, costs) in enumerate(flat.listed()):
            curve.add_grid(sizes, costs, picks[index])
        best = curve.values
    left = int(np.argmin(best))
    if not best[left] < UNREACHABLE:
        raise Infeasible(
            f"no choice of options fits {capacity} GPUs: the jobs that may not wait need more"
        )
    sizes_listed, starts = flat.sizes.tolist(), flat.starts().tolist()
    chosen = [0] * len(starts)
    for index in range(len(starts) - 1, -1, -1):
        pick = int(picks[index, left])
        chosen[index] = pick
        left -= sizes_listed[starts[index] + pick]
    return chosen


def cost_curve(
    options: Sequence[tuple[NDArray[np.int64], NDArray[np.float64]]],
    capacity: int,
    memo: ProgramMemo | None = None,
) -> CostCurve:
    """The :class:`CostCurve` of the jobs' options on ``capacity`` GPUs. The rigid jobs
    that wait in every answer (:func:`_dominated_pairs`) add their wait to the constant
    instead of a pass each; a job added later cannot make them run, since it can only add
    to the GPUs taken (its own options include waiting, or it is counted where its least
    size is: the budget is then larger, and fewer jobs are dropped). A job with one option
    shifts the curve by its size: the curve starts at their summed sizes instead.

    ``memo``: the passes of a last run kept between calls (:mod:`.program_memo`; one of its
    own, not a round's: a round's program runs over other jobs). The same curve to the bit,
    values plus constant: the memo's values start at 0 GPUs, shifted here to the GPUs taken
    (each pass shifts and takes minima, so a shifted start shifts every value), and leave
    out the waits of the jobs it adds as pairs, added here to the constant (exact on the
    grid; a job larger than ``capacity`` but within the memo's waits in the constant here
    and in the values afresh, the same sums)."""
    return cost_curve_flat(Flat.of(options), capacity, memo)


def cost_curve_flat(flat: Flat, capacity: int, memo: ProgramMemo | None = None) -> CostCurve:
    """:func:`cost_curve` of options already flat (costs on the grid)."""
    starts, single = flat.starts(), flat.counts == 1
    taken = int(flat.sizes[starts[single]].sum())
    curve = CostCurve(capacity, taken)
    waits = single.copy()  # it takes its one size; the dominated ones wait
    if len(flat.counts) >= _PRUNE_FROM:
        waits |= _dominated(flat, capacity)
    # Their first options' costs, summed in one go (on the grid every sum is exact, so in
    # any order the same).
    curve.constant += float(flat.costs[starts[waits]].sum())
    rest = flat.jobs(~waits)
    if memo is None or taken > capacity:
        for sizes, costs in rest.listed():
            curve.add_grid(sizes, costs)
        return curve
    values, _ = memo.run(rest, capacity)
    curve.constant += memo.left_out(rest)
    curve.values[:taken] = UNREACHABLE
    curve.values[taken:] = values[: capacity + 1 - taken]
    return curve


def _dominated_pairs(
    options: Sequence[tuple[NDArray[np.int64], NDArray[np.float64]]], capacity: int
) -> set[int]:
    """Jobs the program would leave out whatever else it chooses, found without running it:
    dropped from it, they change nothing of its answer (a backlog of thousands of waiting
    rigid jobs then costs the program only the few that could start).

    A job whose options are off or one size ``n`` (a rigid job) gains ``off - on`` by
    running. At most ``K = (capacity - the GPUs the jobs that may not wait need at least)
    // n`` such jobs of size ``n`` run in any answer. If ``K`` others of size ``n`` each gain
    strictly more, or have exactly its costs and come earlier, the job runs in no answer
    the program returns: were it chosen, one of those ``K`` would wait, and swapping the
    two either costs strictly less or gives an answer of equal cost that the tie rule
    prefers (:func:`choose_options`; its sums are exact). A job in no returned answer can
    be removed from the program without changing the answer
    (tests/core/policies/test_pollux_allocation.py checks it against the whole program on
    random ties)."""
    if len(options) < _PRUNE_FROM:
        return set()
    return set(np.flatnonzero(_dominated(Flat.of(options), capacity)).tolist())


def _dominated(flat: Flat, capacity: int) -> NDArray[np.bool_]:
    """:func:`_dominated_pairs` of flat options, as a mask over the jobs."""
    starts, counts, sizes = flat.starts(), flat.counts, flat.sizes
    dominated = np.zeros(len(counts), dtype=bool)
    first = sizes[starts]
    forced = int(first[first > 0].sum())  # such a job may not wait: it takes at least this
    pair = (first == 0) & (counts == 2)
    budget = capacity - forced
    if budget < 0 or not pair.any():
        return dominated  # infeasible, or no rigid job: the program answers as it is
    jobs = np.flatnonzero(pair)
    pair_sizes = sizes[starts[jobs] + 1]
    pair_offs = flat.costs[starts[jobs]]
    pair_ons = flat.costs[starts[jobs] + 1]
    # Only a size with more pairs than could run at once can drop any: counted in one pass.
    by_size = np.bincount(pair_sizes)
    present = np.flatnonzero(by_size[1:]) + 1  # a pair's size is never 0 (its off is)
    crowded = present[by_size[present] > budget // present]
    for size in crowded.tolist():
        fits = budget // size
        group = pair_sizes == size
        members, offs, ons = jobs[group], pair_offs[group], pair_ons[group]
        gain = offs - ons
        ascending = np.sort(gain)
        better = len(members) - ascending.searchsorted(gain, side="right")
        # Exactly equal costs, earlier in the list: the rank within each class of equals.
        order = np.lexsort((members, ons, offs))
        same = (offs[order][1:] == offs[order][:-1]) & (ons[order][1:] == ons[order][:-1])
        run_starts = np.flatnonzero(np.concatenate(([True], ~same)))
        run_start = np.repeat(run_starts, np.diff(np.append(run_starts, len(order))))
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order)) - run_start
        dominated[members[better + rank >= fits]] = True
    return dominated


_PRUNE_FROM = 64
"""Fewer jobs than this: the program runs on all of them (the search would cost more)."""
