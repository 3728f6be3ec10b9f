"""Values per job, kept while the job is the same object, from one round to the next.

A job is replaced on every change (:class:`~jigsaw.model.domain.Job`), so a value that reads
only the job's own fields holds while the job is the very same object. Values are kept in
generations of :data:`GENERATION_ROUNDS` rounds: what a whole generation does not ask for is
dropped after the next (a long replay would otherwise keep every job it met), and a value
asked every round moves to the new generation once per generation, not once per round.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Generic, TypeVar

from jigsaw.model.domain import Job

V = TypeVar("V")


GENERATION_ROUNDS = 16
"""Rounds per generation of kept values."""


class JobMemo(Generic[V]):
    """Per job object, a value: what this generation of rounds and the last asked for."""

    __slots__ = ("_last", "_rounds", "_this")

    def __init__(self) -> None:
        self._this: dict[int, tuple[Job, V]] = {}
        self._last: dict[int, tuple[Job, V]] = {}
        self._rounds = 0

    def next_round(self) -> None:
        """A round begins: every :data:`GENERATION_ROUNDS` rounds, keep what the last
        generation asked and forget what the one before asked."""
        self._rounds += 1
        if self._rounds >= GENERATION_ROUNDS:
            self._rounds = 0
            self._last, self._this = self._this, {}

    def get(self, job: Job) -> V | None:
        """The value kept for this very job object (``None``: none)."""
        key = id(job)
        kept = self._this.get(key)
        if kept is None or kept[0] is not job:
            kept = self._last.get(key)
            if kept is None or kept[0] is not job:
                return None
            self._this[key] = kept
        return kept[1]

    def get_many(self, jobs: Iterable[Job]) -> list[V | None]:
        """:meth:`get` of each job, in order (one call for a round's many)."""
        this, last = self._this, self._last
        found: list[V | None] = []
        for job in jobs:
            key = id(job)
            kept = this.get(key)
            if kept is None or kept[0] is not job:
                kept = last.get(key)
                if kept is None or kept[0] is not job:
                    found.append(None)
                    continue
                this[key] = kept
            found.append(kept[1])
        return found

    def put(self, job: Job, value: V) -> None:
        self._this[id(job)] = (job, value)
