"""Reason codes: a short machine-readable ``Type/Reason`` beside every event's text.

The text says what happened to a person (``preempted by j-1 (las: outranked)``); the code says
it to a program (``Preempted/OutrankedBy``), as Kueue's workload conditions do. Codes are
stable: dashboards, alerts and tests match on them, never on the text.
"""

from __future__ import annotations

from enum import StrEnum

from jigsaw.model.lifecycle import JobState


class ReasonCode(StrEnum):
    SUBMITTED = "Pending/Submitted"
    UNSCHEDULABLE = "Pending/Unschedulable"
    """Still waiting, but the cluster shrank below the gang (``PENDING -> PENDING``)."""
    ADMITTED = "Admitted/Scheduled"
    RUNNING = "Running/WorkersUp"
    RESIZED = "Running/Resized"
    """A policy restarted the running gang at a new size or batch (``RUNNING -> RUNNING``)."""
    RESIZE_REVERTED = "Running/ResizeReverted"
    """The resized gang could not be placed in time; the executor restarted the job at its
    last size from the same checkpoint (``RUNNING -> RUNNING``)."""
    SUCCEEDED = "Succeeded/IterationsReached"
    PREEMPTED = "Preempted/Scheduler"
    PREEMPTED_BY = "Preempted/OutrankedBy"
    REQUEUED_AFTER_FAILURE = "Preempted/LaunchFailed"
    RETRYING = "Retrying/WorkerFailed"
    FAILED = "Failed/Error"
    CRASH_LOOP = "Failed/CrashLoop"
    POISON = "Failed/PolicyError"
    CANCELLED = "Cancelled/ByUser"


_BY_TARGET: dict[JobState, ReasonCode] = {
    JobState.PENDING: ReasonCode.SUBMITTED,
    JobState.ADMITTED: ReasonCode.ADMITTED,
    JobState.RUNNING: ReasonCode.RUNNING,
    JobState.SUCCEEDED: ReasonCode.SUCCEEDED,
    JobState.PREEMPTED: ReasonCode.PREEMPTED,
    JobState.RETRYING: ReasonCode.RETRYING,
    JobState.FAILED: ReasonCode.FAILED,
    JobState.CANCELLED: ReasonCode.CANCELLED,
}


def default_code(source: JobState | None, target: JobState) -> ReasonCode:
    """The code of a transition whose caller named none: the plain one of its target."""
    del source  # every edge into a state shares its default; callers name the special ones
    return _BY_TARGET[target]
