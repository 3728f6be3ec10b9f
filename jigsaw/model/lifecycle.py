"""The job lifecycle as an explicit transition table.

Every edge carries a comment saying when it is taken. The SQL store derives its
``WHERE state IN (...)`` guards from :func:`sources_of`, so code and database enforce the same
table.
"""

from __future__ import annotations

from enum import StrEnum


class JobState(StrEnum):
    PENDING = "PENDING"
    ADMITTED = "ADMITTED"
    RUNNING = "RUNNING"
    PREEMPTED = "PREEMPTED"
    RETRYING = "RETRYING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_STATES

    @property
    def is_waiting(self) -> bool:
        """Holds no resources and wants some: the policy may start it."""
        return self in WAITING_STATES

    @property
    def holds_resources(self) -> bool:
        # Identity with module-level aliases, not ``in (...)`` or ``JobState.X``: StrEnum
        # equality goes through str.__eq__, reading a member off the class costs about a
        # microsecond, and the simulator asks this millions of times per replay.
        return self is _ADMITTED or self is _RUNNING


_ADMITTED, _RUNNING = JobState.ADMITTED, JobState.RUNNING

TERMINAL_STATES = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED})
WAITING_STATES = frozenset({JobState.PENDING, JobState.PREEMPTED, JobState.RETRYING})

TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    JobState.PENDING: frozenset(
        {
            JobState.ADMITTED,  # a policy reserved GPUs for the whole gang
            JobState.FAILED,  # the policy raises whenever it decides with this job (poison)
            JobState.CANCELLED,  # the owner or an admin cancelled it
        }
    ),
    JobState.ADMITTED: frozenset(
        {
            JobState.RUNNING,  # the executor reports every worker of the gang up
            JobState.PREEMPTED,  # taken back before it started: another job needs the GPUs
            JobState.FAILED,  # the gang could not be launched (bad model entrypoint, ...)
            JobState.CANCELLED,
        }
    ),
    JobState.RUNNING: frozenset(
        {
            JobState.RUNNING,  # resized: restarted from a checkpoint at a new size or batch
            JobState.PREEMPTED,  # checkpointed and stopped to make room; names the preemptor
            JobState.RETRYING,  # a worker or node died; the gang restarts from a checkpoint
            JobState.SUCCEEDED,  # reached its iteration target
            JobState.FAILED,  # training raised, or the retry budget is spent
            JobState.CANCELLED,
        }
    ),
    JobState.PREEMPTED: frozenset(
        {
            JobState.ADMITTED,  # GPUs reserved again; it resumes from its checkpoint
            JobState.FAILED,  # the policy raises whenever it decides with this job (poison)
            JobState.CANCELLED,
        }
    ),
    JobState.RETRYING: frozenset(
        {
            JobState.ADMITTED,  # back-off elapsed; the gang restarts from the last checkpoint
            JobState.FAILED,  # crash loop: too many failures in the window
            JobState.CANCELLED,
        }
    ),
    JobState.SUCCEEDED: frozenset(),
    JobState.FAILED: frozenset(),
    JobState.CANCELLED: frozenset(),
}


def can_transition(source: JobState, target: JobState) -> bool:
    return target in TRANSITIONS[source]


def sources_of(target: JobState) -> frozenset[JobState]:
    """Every state from which ``target`` may be entered (for SQL guards)."""
    return _SOURCES[target]


_SOURCES: dict[JobState, frozenset[JobState]] = {
    target: frozenset(src for src, targets in TRANSITIONS.items() if target in targets)
    for target in JobState
}
"""Built once: every stored transition asks for its sources."""


def cancellable_states() -> frozenset[JobState]:
    return sources_of(JobState.CANCELLED)
