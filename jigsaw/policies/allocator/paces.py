"""The jobs' paces for the completion guard, computed only where read.

Co-tenancy (:meth:`~.cotenancy.Cotenancy.offer_slots`) sets a round's paces (completions per
second per unit of speedup, :attr:`~.configurations.Problem.pace`) when it offers slots; only
the 0-1 program (:mod:`.solve`) and the bound before it (:mod:`.joint_bound`) read them, for
the jobs they re-decide, and most rounds that offer slots run neither. Each pace is the same
float whenever it is computed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import overload


class Paces(Sequence[float]):
    """Each job's pace, computed when first read (``pace_of(index)``) and kept."""

    __slots__ = ("_count", "_known", "_of")

    def __init__(self, count: int, pace_of: Callable[[int], float]) -> None:
        self._count = count
        self._of = pace_of
        self._known: dict[int, float] = {}

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> float: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[float]: ...

    def __getitem__(self, index: int | slice) -> float | Sequence[float]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._count))]
        if index < 0:
            index += self._count
        if not 0 <= index < self._count:
            raise IndexError(index)
        known = self._known.get(index)
        if known is None:
            known = self._known[index] = self._of(index)
        return known
