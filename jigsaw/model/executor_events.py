"""What an executor reports back to the scheduling cycle.

``attempt`` fences reports: one that names an attempt other than the job's current one comes
from a zombie gang (a previous launch) and is ignored. Executors that cannot know the attempt
(the simulator) leave it ``None``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jigsaw.model.cluster import Placement
from jigsaw.model.lease_outcome import LeaseOutcome
from jigsaw.model.plan import Plan


@dataclass(frozen=True, slots=True)
class Started:
    job_id: str
    at: float
    attempt: int | None = None


@dataclass(frozen=True, slots=True)
class Progressed:
    """A lease finished: ``iterations_done`` is absolute, so duplicates are harmless."""

    job_id: str
    at: float
    iterations_done: float
    outcome: LeaseOutcome | None = None
    """What the lease measured (None: the executor knows progress only)."""
    attempt: int | None = None

    @property
    def metrics(self) -> dict[str, Any]:
        """The outcome's JSON form (what the API shows); empty without one."""
        return self.outcome.as_metrics() if self.outcome is not None else {}


@dataclass(frozen=True, slots=True)
class Finished:
    job_id: str
    at: float
    iterations_done: float
    outcome: LeaseOutcome | None = None
    """The last lease's outcome (None: the executor knows progress only)."""
    attempt: int | None = None

    @property
    def metrics(self) -> dict[str, Any]:
        """The outcome's JSON form (what the API shows); empty without one."""
        return self.outcome.as_metrics() if self.outcome is not None else {}


@dataclass(frozen=True, slots=True)
class Failed:
    """A gang failed. ``retryable`` means the worker or node died, not the user's code."""

    job_id: str
    at: float
    reason: str
    retryable: bool = False
    attempt: int | None = None
    detail: tuple[str, ...] = ()
    """Lines for the job's log: the worker's traceback and the tail of its stdout/stderr."""


@dataclass(frozen=True, slots=True)
class ResizeReverted:
    """A resize's new gang could not be placed within the startup timeout: the executor
    restarted the job at its last size (``placement``, ``plan``, ``worker_batch``) from the
    checkpoint the resize took, which it never loses."""

    job_id: str
    at: float
    placement: Placement
    plan: Plan
    worker_batch: int
    reason: str
    attempt: int | None = None


ExecutorEvent = Started | Progressed | Finished | Failed | ResizeReverted
