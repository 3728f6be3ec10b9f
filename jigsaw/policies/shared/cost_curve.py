"""The size program's values as a curve over GPUs, on an exact grid of costs.

:class:`CostCurve` holds, for each count of GPUs, the least summed cost of the jobs added so
far that use exactly that many; adding a job is one vector pass per option it has. Costs are
rounded to multiples of ``1 / COST_GRID`` first, so every sum is exact and a tie is a tie
(:func:`~jigsaw.policies.shared.pollux_allocation.choose_options` relies on it).
:class:`Flat` holds a program's jobs as the curve reads them: every job's options in
three arrays.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

UNREACHABLE = np.inf

COST_GRID = 2.0**16
"""Costs are rounded to multiples of ``1 / COST_GRID`` (1.5e-5, far below any difference
between two configurations that matters), which makes the program's sums exact."""


def _on_grid(costs: NDArray[np.float64]) -> NDArray[np.float64]:
    """:func:`_grid` of every cost (the same rounding, half to even)."""
    result: NDArray[np.float64] = np.round(costs * COST_GRID) / COST_GRID
    return result


def _grid(cost: float) -> float:
    """``cost`` on the grid: applied as the program reads each cost, where it is a Python
    float already (rounding a round's arrays first cost as much as the program)."""
    return round(cost * COST_GRID) / COST_GRID


class CostCurve:
    """The dynamic program's values: for each count ``g`` of GPUs, the least summed cost (on
    the grid) of the jobs added so far using exactly ``g`` (``UNREACHABLE`` where none
    does), plus a constant (jobs that wait in every answer). :func:`_program` adds every job
    and traces its choices back; a caller that needs only the optimum's cost (a bound) adds
    jobs without choices, and may copy a curve to finish it several ways."""

    __slots__ = ("_padded", "_width", "constant")

    def __init__(self, capacity: int, taken: int = 0) -> None:
        """``taken``: GPUs held by jobs that may not wait, at one size each (their costs go
        to :attr:`constant`): the curve starts there, as those jobs' passes would leave it."""
        self._width = width = capacity + 1
        # ``padded[width:]`` holds the curve, behind ``width`` unreachable entries: the
        # curve shifted right by ``size`` GPUs is the view
        # ``padded[width - size : 2 * width - size]``.
        self._padded = np.full(2 * width, UNREACHABLE)
        if taken <= capacity:
            self._padded[width + taken] = 0.0
        self.constant = 0.0

    @property
    def values(self) -> NDArray[np.float64]:
        """The curve itself (a view), without the constant."""
        return self._padded[self._width :]

    def copy(self) -> CostCurve:
        twin = CostCurve.__new__(CostCurve)
        twin._width, twin._padded, twin.constant = self._width, self._padded.copy(), self.constant
        return twin

    def least(self) -> float:
        """The optimum's cost over the jobs added: the curve's least value plus the constant
        (``UNREACHABLE`` when no choice of their options fits)."""
        return float(self.values.min()) + self.constant

    def add(
        self,
        sizes: NDArray[np.int64],
        costs: NDArray[np.float64],
        pick: NDArray[np.int32] | None = None,
    ) -> None:
        """Add one job's ``(sizes, costs)``; ``pick``, when given, receives the index of the
        option the new optimum at each GPU count takes (the first strictly cheaper wins)."""
        self.add_grid(sizes.tolist(), [_grid(cost) for cost in costs.tolist()], pick)

    def add_grid(
        self, listed: list[int], costs: list[float], pick: NDArray[np.int32] | None = None
    ) -> None:
        """:meth:`add` of sizes and costs already on the grid, as lists."""
        width, padded = self._width, self._padded
        capacity = width - 1
        best_so_far = padded[width:]
        if len(listed) == 2 and listed[0] == 0 and 0 < listed[1] <= capacity:
            # Off or one size, the most common pair (a rigid job): the same arithmetic as
            # :func:`add_options`, without its bookkeeping.
            # Every value rises by ``off`` (kept in :attr:`constant`), and running rises by
            # ``on - off`` more: on the grid, the same exact comparisons as adding both.
            off, on = costs
            shifted = padded[width - listed[1] : 2 * width - listed[1]] + (on - off)
            self.constant += off
            if pick is not None:
                np.less(shifted, best_so_far, out=pick, casting="unsafe")
            np.minimum(best_so_far, shifted, out=best_so_far)
            return
        new = np.empty(width)
        add_options(padded, new, width, listed, costs, pick)
        best_so_far[:] = new


def add_options(
    previous: NDArray[np.float64],
    out: NDArray[np.float64],
    width: int,
    sizes: list[int],
    costs: list[float],
    pick: NDArray[np.integer[Any]] | None = None,
) -> None:
    """One job's pass in general: ``out`` (``width`` values) receives the curve after the
    job, from ``previous`` padded (``width`` unreachable entries, then the curve); ``pick``,
    when given, the option each value takes. Each option shifts the curve by its size and
    adds its cost; the first strictly cheaper option wins (argmin's tie rule), one vector
    pass per option. ``out`` must not share memory with ``previous``."""
    capacity = width - 1
    first = True
    for option, (size, cost) in enumerate(zip(sizes, costs, strict=True)):
        if size > capacity:
            continue
        shifted = previous[width - size : 2 * width - size] + cost
        if first:  # the first option is better than nothing wherever it reaches
            out[:] = shifted
            if pick is not None:
                pick[:] = option
            first = False
        elif pick is None:
            np.minimum(out, shifted, out=out)
        else:
            better = shifted < out
            np.copyto(out, shifted, where=better)
            pick[better] = option
    if first:  # no option fits: nothing is reachable (and nothing is picked)
        out[:] = UNREACHABLE
        if pick is not None:
            pick[:] = 0


@dataclass(frozen=True, slots=True)
class Flat:
    """Every job's options in three arrays: their sizes and costs, job after job, and how
    many options each job has (one concatenation, so the program's checks are vector passes
    rather than a Python step per job)."""

    sizes: NDArray[np.int64]
    costs: NDArray[np.float64]
    """On the grid (:func:`~jigsaw.policies.shared.cost_curve._on_grid`)."""
    counts: NDArray[np.int64]

    @classmethod
    def of(cls, options: Sequence[tuple[NDArray[np.int64], NDArray[np.float64]]]) -> Flat:
        counts = np.fromiter((len(option[0]) for option in options), np.int64, len(options))
        if not len(options):
            return cls(np.empty(0, dtype=np.int64), np.empty(0), counts)
        sizes = np.concatenate([option[0] for option in options]).astype(np.int64, copy=False)
        costs = _on_grid(np.concatenate([option[1] for option in options]))
        return cls(sizes, costs, counts)

    def starts(self) -> NDArray[np.int64]:
        """Where each job's options begin."""
        counts = self.counts
        return counts.cumsum() - counts

    def jobs(self, keep: NDArray[np.bool_]) -> Flat:
        """The jobs ``keep`` marks, in their order."""
        options = keep.repeat(self.counts)
        return Flat(self.sizes[options], self.costs[options], self.counts[keep])

    def listed(self, first_job: int = 0) -> Iterator[tuple[list[int], list[float]]]:
        """Each job's sizes and costs as lists (what :meth:`CostCurve.add_grid` reads), from
        the job ``first_job`` on."""
        ends = self.counts.cumsum()
        first = int(ends[first_job - 1]) if first_job else 0
        sizes, costs = self.sizes[first:].tolist(), self.costs[first:].tolist()
        at = 0
        for end in (ends[first_job:] - first).tolist():
            yield sizes[at:end], costs[at:end]
            at = end
