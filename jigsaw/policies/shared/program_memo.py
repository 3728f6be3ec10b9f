"""The size program's curve after each job of its last run, so that the next run starts where
the two job lists first differ.

Between two rounds most of a program's jobs are the same, in the same order, at the same
costs: a running rigid job keeps its prices while it runs (its weight is frozen at its start,
the configuration it runs is not discounted, and under a backlog the fair share stays one
GPU). After its first ``k`` jobs the program's curve depends only on those jobs' sizes and
costs on the grid, so a run whose first ``k`` jobs equal the last run's resumes from the
curve kept there and adds only the rest (:func:`~jigsaw.policies.shared.pollux_allocation.
choose_options` with ``memo``).

The memo runs every program at the largest capacity it has been asked for. A curve's values
at ``g`` GPUs depend only on its values at ``g`` or fewer (each option shifts it right), so up
to a smaller capacity the choices are those of that capacity's own program: one memo serves
rounds whose capacity moves with the jobs pinned to one size. (A rigid job whose size lies
between the two capacities adds its wait to the curve's constant here and to its values
there: a uniform shift of exact sums, which changes no comparison.)
tests/core/policies/test_program_memo.py holds it to the whole program.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from jigsaw.policies.shared.cost_curve import CostCurve, Flat


class ProgramMemo:
    """The last run's jobs (their sizes and costs on the grid, flat, and how many options
    each has), its curve after each job, and each job's choices."""

    __slots__ = ("_capacity", "_costs", "_counts", "_curves", "_picks", "_sizes", "added", "reused")

    def __init__(self) -> None:
        self._capacity = -1
        self._sizes: NDArray[np.int64] = np.empty(0, dtype=np.int64)
        self._costs: NDArray[np.float64] = np.empty(0)
        self._counts: NDArray[np.int64] = np.empty(0, dtype=np.int64)
        self._curves: NDArray[np.float64] = np.empty((0, 0))
        self._picks: NDArray[np.int32] = np.empty((0, 0), dtype=np.int32)
        self.reused = 0
        """Jobs whose pass a run took from the memo (a counter, for tests and diagnosis)."""
        self.added = 0
        """Jobs a run added afresh."""

    def run(self, flat: Flat, capacity: int) -> tuple[NDArray[np.float64], NDArray[np.int32]]:
        """The program within ``capacity`` GPUs over the jobs of ``flat`` (costs on the
        grid). Returns its values on 0..``capacity`` GPUs, and per job a row of the option
        the optimum at each GPU count takes (read only up to ``capacity``; valid until the
        next run)."""
        if capacity > self._capacity:
            self._reset(capacity)
        sizes, costs, counts = flat.sizes, flat.costs, flat.counts
        kept = self._kept(sizes, costs, counts, np.cumsum(counts))
        self._grow(len(counts))
        curve = CostCurve(self._capacity)
        if kept:
            curve.values[:] = self._curves[kept - 1]
        curves, picks = self._curves, self._picks
        for index, (job_sizes, job_costs) in enumerate(flat.listed(kept), start=kept):
            curve.add_grid(job_sizes, job_costs, picks[index])
            curves[index] = curve.values
        self._sizes, self._costs, self._counts = sizes, costs, counts
        self.reused += kept
        self.added += len(counts) - kept
        return curve.values[: capacity + 1], picks

    def _kept(
        self,
        sizes: NDArray[np.int64],
        costs: NDArray[np.float64],
        counts: NDArray[np.int64],
        ends: NDArray[np.int64],
    ) -> int:
        """How many of the first jobs are the last run's: the same options, at the same
        costs on the grid."""
        shared = min(len(counts), len(self._counts))
        moved = np.flatnonzero(counts[:shared] != self._counts[:shared])
        jobs = int(moved[0]) if len(moved) else shared
        if not jobs:
            return 0
        width = int(ends[jobs - 1])  # the options of those jobs line up, one for one
        changed = np.flatnonzero(
            (sizes[:width] != self._sizes[:width]) | (costs[:width] != self._costs[:width])
        )
        if not len(changed):
            return jobs
        return int(np.searchsorted(ends, changed[0], side="right"))

    def _reset(self, capacity: int) -> None:
        self._capacity = capacity
        self._counts = np.empty(0, dtype=np.int64)
        self._curves = np.empty((0, capacity + 1))
        self._picks = np.empty((0, capacity + 1), dtype=np.int32)

    def _grow(self, rows: int) -> None:
        """Room for ``rows`` jobs' curves and choices (doubling; every row is copied, the
        kept ones among them)."""
        have = len(self._curves)
        if rows <= have:
            return
        size = max(rows, 2 * have, 64)
        width = self._capacity + 1
        curves = np.empty((size, width))
        picks = np.zeros((size, width), dtype=np.int32)
        curves[:have] = self._curves
        picks[:have] = self._picks
        self._curves, self._picks = curves, picks
