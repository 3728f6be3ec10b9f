"""A round's answer: the column chosen for each job, its cost and the solver that found it.

Its own module so that the solver (:mod:`.solve`) and the bound it consults
(:mod:`.guest_bound`) both name it without importing each other."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Solution:
    chosen: list[int]
    """The column chosen for each job."""
    cost: float
    solver: str
    """``dp`` or ``highs``."""
