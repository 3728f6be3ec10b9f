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

from typing import Any

import numpy as np
from numpy.typing import NDArray

from jigsaw.policies.shared.cost_curve import UNREACHABLE, Flat, add_options

_NARROW_OPTIONS = 127
"""The most options a job may have for the memo to keep its choices as ``int8``."""


class ProgramMemo:
    """The last run's jobs (their sizes and costs on the grid, flat, and how many options
    each has), its curve after each job, and each job's choices."""

    __slots__ = (
        "_capacity",
        "_costs",
        "_counts",
        "_curves",
        "_picks",
        "_scratch",
        "_sizes",
        "_start",
        "added",
        "reused",
    )

    def __init__(self) -> None:
        self._capacity = -1
        self._sizes: NDArray[np.int64] = np.empty(0, dtype=np.int64)
        self._costs: NDArray[np.float64] = np.empty(0)
        self._counts: NDArray[np.int64] = np.empty(0, dtype=np.int64)
        self._start: NDArray[np.float64] = np.empty(0)
        """The padded curve before any job (see :attr:`_curves`)."""
        self._curves: NDArray[np.float64] = np.empty((0, 0))
        """Per job, the curve after it, padded: ``width`` unreachable entries, then the
        values on 0..capacity GPUs (so the curve shifted right by ``size`` GPUs is the row's
        slice ``[width - size : 2 * width - size]``)."""
        self._picks: NDArray[np.integer[Any]] = np.empty((0, 0), dtype=np.int8)
        self._scratch: tuple[NDArray[np.float64], NDArray[np.integer[Any]]] | None = None
        """Rows a trial run writes past the kept jobs (:meth:`trial`), reused between trials."""
        self.reused = 0
        """Jobs whose pass a run took from the memo (a counter, for tests and diagnosis)."""
        self.added = 0
        """Jobs a run added afresh."""

    def run(
        self, flat: Flat, capacity: int
    ) -> tuple[NDArray[np.float64], NDArray[np.integer[Any]]]:
        """The program within ``capacity`` GPUs over the jobs of ``flat`` (costs on the
        grid). Returns its values on 0..``capacity`` GPUs, and per job a row of the option
        the optimum at each GPU count takes (read only up to ``capacity``; valid until the
        next run)."""
        return self._run(flat, capacity, record=True)

    def trial(self) -> ProgramMemo:
        """A memo whose runs resume from this one's last run as :meth:`run` does, but leave
        it as it was: for a program asked once beside the round's own (the quiet-round
        check's, at other prices), so the next round still resumes from the round's run."""
        return _Trial(self)

    def _run(
        self, flat: Flat, capacity: int, *, record: bool
    ) -> tuple[NDArray[np.float64], NDArray[np.integer[Any]]]:
        sizes, costs, counts = flat.sizes, flat.costs, flat.counts
        wide = bool(len(counts)) and int(counts.max()) > _NARROW_OPTIONS
        if capacity > self._capacity or (wide and self._picks.dtype == np.int8):
            self._reset(max(capacity, self._capacity), wide)
            record = True  # nothing kept to resume from: this run is the memo's own
        kept = self._kept(sizes, costs, counts, counts.cumsum())
        width = self._capacity + 1
        if record:
            self._grow(len(counts))
            rows, picks, first = self._curves, self._picks, 0
        else:
            rows, picks = self._trial_rows(len(counts) - kept)
            first = kept
        flags = picks.view(np.bool_) if picks.dtype == np.int8 else None
        previous = self._curves[kept - 1] if kept else self._start
        for index, (job_sizes, job_costs) in enumerate(flat.listed(kept), start=kept - first):
            row = rows[index]
            pick = picks[index]
            flag = flags[index] if flags is not None else pick
            _add_job(previous, row, width, job_sizes, job_costs, pick, flag)
            previous = row
        values = previous[width : width + capacity + 1]
        if not record:
            return values, np.concatenate((self._picks[:kept], picks[: len(counts) - kept]))
        self._sizes, self._costs, self._counts = sizes, costs, counts
        self.reused += kept
        self.added += len(counts) - kept
        return values, picks

    def _trial_rows(self, rows: int) -> tuple[NDArray[np.float64], NDArray[np.integer[Any]]]:
        """At least ``rows`` padded curve rows and choice rows for a trial run (their first
        ``width`` entries unreachable: no pass writes them)."""
        width = self._capacity + 1
        scratch = self._scratch
        if (
            scratch is None
            or len(scratch[0]) < rows
            or scratch[0].shape[1] != 2 * width
            or scratch[1].dtype != self._picks.dtype
        ):
            size = max(rows, 64)
            scratch = self._scratch = (
                np.full((size, 2 * width), UNREACHABLE),
                np.zeros((size, width), dtype=self._picks.dtype),
            )
        return scratch

    def left_out(self, flat: Flat) -> float:
        """What the last run's values leave out of ``flat``'s summed costs: the off cost of
        each job it added as a pair (off, or one size within the memo's capacity), which
        :meth:`~jigsaw.policies.shared.cost_curve.CostCurve.add_grid` keeps in a curve's
        constant (a sum on the grid: exact)."""
        starts = flat.starts()[flat.counts == 2]
        off, on = flat.sizes[starts], flat.sizes[starts + 1]
        pairs = starts[(off == 0) & (on > 0) & (on <= self._capacity)]
        return float(flat.costs[pairs].sum())

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
        return int(ends.searchsorted(changed[0], side="right"))

    def _reset(self, capacity: int, wide: bool = False) -> None:
        """An empty memo at ``capacity``; ``wide``: choices kept as ``int32`` (some job has
        more than :data:`_NARROW_OPTIONS` options), else as ``int8``."""
        self._capacity = capacity
        width = capacity + 1
        self._counts = np.empty(0, dtype=np.int64)
        self._start = np.full(2 * width, UNREACHABLE)
        self._start[width] = 0.0  # no job added: zero GPUs used, at no cost
        self._curves = np.empty((0, 2 * width))
        self._picks = np.empty((0, width), dtype=np.int32 if wide else np.int8)

    def _grow(self, rows: int) -> None:
        """Room for ``rows`` jobs' curves and choices (doubling; every row is copied, the
        kept ones among them)."""
        have = len(self._curves)
        if rows <= have:
            return
        size = max(rows, 2 * have, 64)
        width = self._capacity + 1
        curves = np.full((size, 2 * width), UNREACHABLE)
        picks = np.zeros((size, width), dtype=self._picks.dtype)
        curves[:have] = self._curves
        picks[:have] = self._picks
        self._curves, self._picks = curves, picks


def _add_job(
    previous: NDArray[np.float64],
    row: NDArray[np.float64],
    width: int,
    sizes: list[int],
    costs: list[float],
    pick: NDArray[np.integer[Any]],
    flag: NDArray[np.bool_] | NDArray[np.integer[Any]],
) -> None:
    """:meth:`~jigsaw.policies.shared.cost_curve.CostCurve.add_grid` from one padded curve
    row into the next (``row[width:]``; its first ``width`` entries stay unreachable), with
    the same arithmetic, so the same values and choices: written in place, without the
    curve object, its temporaries or a copy of each job's curve. ``flag``: ``pick`` itself,
    or where it is ``int8``, the same bytes as booleans (a rigid job's choice is 0 or 1, and
    writing it so needs no cast)."""
    capacity = width - 1
    best_so_far = previous[width:]
    out = row[width:]
    if len(sizes) == 2 and sizes[0] == 0 and 0 < sizes[1] <= capacity:
        # Off or one size (a rigid job): the curve's values rise by ``on - off`` where it
        # runs, its constant by ``off`` (a uniform shift the memo's values leave out).
        size = sizes[1]
        np.add(previous[width - size : 2 * width - size], costs[1] - costs[0], out=out)
        np.less(out, best_so_far, out=flag, casting="unsafe")
        np.minimum(best_so_far, out, out=out)
        return
    add_options(previous, out, width, sizes, costs, pick)


class _Trial(ProgramMemo):
    """:meth:`ProgramMemo.trial`: runs that read a memo and leave it as it was."""

    __slots__ = ("_memo",)

    def __init__(self, memo: ProgramMemo) -> None:  # no state of its own
        self._memo = memo

    def run(
        self, flat: Flat, capacity: int
    ) -> tuple[NDArray[np.float64], NDArray[np.integer[Any]]]:
        return self._memo._run(flat, capacity, record=False)

    def trial(self) -> ProgramMemo:
        return self

    def left_out(self, flat: Flat) -> float:
        return self._memo.left_out(flat)
