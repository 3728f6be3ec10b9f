"""The active jobs as the scheduling cycle reads them each round: the side that holds GPUs
and the side that waits, each in arrival order."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from jigsaw.model.domain import Job
from jigsaw.model.lifecycle import JobState
from jigsaw.model.sorted_pairs import SortedPairs

HOLDING_STATES = frozenset({JobState.ADMITTED, JobState.RUNNING})
WAITING_STATES = frozenset({JobState.PENDING, JobState.PREEMPTED, JobState.RETRYING})


@dataclass(frozen=True, slots=True)
class ActiveSides:
    holding: Sequence[Job]
    """ADMITTED and RUNNING jobs, by (``submitted_at``, ``id``)."""
    waiting: Sequence[Job]
    """PENDING, PREEMPTED and RETRYING jobs, by (``submitted_at``, ``id``), backing-off ones
    included."""
    backing_off: bool
    """Whether any waiting job carries a ``retry_after`` (False: none is held back, and the
    snapshot takes ``waiting`` whole)."""


def split_sides(jobs: Iterable[Job]) -> ActiveSides:
    """``jobs`` (already in arrival order) split into their sides; terminal ones dropped."""
    holding: list[Job] = []
    waiting: list[Job] = []
    backing_off = False
    for job in jobs:
        if job.state in HOLDING_STATES:
            holding.append(job)
        elif job.state in WAITING_STATES:
            waiting.append(job)
            backing_off = backing_off or job.retry_after is not None
    return ActiveSides(holding, waiting, backing_off)


class ArrivalOrdered:
    """Job records kept sorted by (``submitted_at``, ``id``)
    (:class:`~jigsaw.model.sorted_pairs.SortedPairs`), so a reader copies the list as it
    stands and never sorts."""

    __slots__ = ("_pairs",)

    def __init__(self) -> None:
        self._pairs: SortedPairs[tuple[float, str], Job] = SortedPairs()

    def __len__(self) -> int:
        return len(self._pairs)

    def put(self, job: Job) -> None:
        """Adds ``job`` at its place, or replaces the record of the same job there."""
        self._pairs.put((job.submitted_at, job.id), job)

    def remove(self, job: Job) -> None:
        """Drops the record of ``job`` (a KeyError if there is none)."""
        self._pairs.remove((job.submitted_at, job.id))

    def jobs(self) -> list[Job]:
        return list(self._pairs.items)
