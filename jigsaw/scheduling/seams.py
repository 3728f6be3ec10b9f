"""The three seams the scheduling cycle runs against.

Simulation plugs in the in-memory store, the simulated executor and a virtual clock; the
service plugs in the SQL store, the Ray executor and the wall clock. Nothing else differs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

from jigsaw.model.cluster import Placement
from jigsaw.model.domain import Job, JobEvent
from jigsaw.model.errors import JigsawError
from jigsaw.model.executor_events import ExecutorEvent
from jigsaw.model.lifecycle import JobState
from jigsaw.model.plan import Plan
from jigsaw.scheduling.active_sides import ActiveSides

JOB_SORT_KEYS = ("submitted", "name", "user", "queue", "state", "priority")
"""What :meth:`Store.list_jobs` sorts by."""


def parsed_sort(sort: str) -> tuple[str, bool]:
    """``-name`` as ``("name", True)`` (descending); a key outside :data:`JOB_SORT_KEYS` is a
    ValueError naming them."""
    key = sort.removeprefix("-")
    if key not in JOB_SORT_KEYS:
        raise ValueError(f"sort must be one of {', '.join(JOB_SORT_KEYS)}, got {sort!r}")
    return key, sort.startswith("-")


def name_matcher(pattern: str) -> re.Pattern[str]:
    """The ``name`` filter of :meth:`Store.list_jobs` as a regular expression: the whole
    name, case-insensitively, ``*`` matching any run of characters."""
    body = ".*".join(re.escape(part) for part in pattern.split("*"))
    return re.compile(body, re.IGNORECASE | re.DOTALL)


class Clock(Protocol):
    def now(self) -> float: ...


class Store(Protocol):
    """Durable job state. ``save`` is a compare-and-set on ``version``.

    ``save`` raises :class:`~jigsaw.model.errors.ConflictError` when the stored version differs
    from ``expected_version`` (someone else wrote first) or, for a transition, when the stored
    state is not a legal source of the new state.
    """

    def add(self, job: Job, event: JobEvent) -> Job: ...

    def get(self, job_id: str) -> Job: ...

    def active_jobs(self) -> list[Job]:
        """Every job not in a terminal state, in arrival order: by ``submitted_at``, then by
        ``id``."""
        ...

    def active_sides(self) -> ActiveSides:
        """The active jobs split into the side that holds GPUs and the side that waits, each
        in arrival order: what the scheduling cycle builds each round's snapshot from."""
        ...

    def list_jobs(
        self,
        *,
        states: Iterable[JobState] | None = None,
        user: str | None = None,
        queue: str | None = None,
        name: str | None = None,
        since: float | None = None,
        sort: str = "submitted",
        limit: int = 100,
        offset: int = 0,
    ) -> list[Job]:
        """Jobs matching every filter given: ``name`` case-insensitively, ``*`` matching any
        run of characters; ``since``: submitted at or after. ``sort`` is one of
        :data:`JOB_SORT_KEYS`, ``-`` before it for descending; ties go by submission time,
        then id, in the same direction."""
        ...

    def save(self, job: Job, *, expected_version: int, event: JobEvent | None = None) -> Job: ...

    def events(self, job_id: str) -> list[JobEvent]: ...


class ReplanRefused(JigsawError):
    """The executor did not apply a re-plan or a resize; the message says why (the job keeps
    its plan and size)."""


class Executor(Protocol):
    """Runs gangs. Calls return at once; outcomes arrive through :meth:`poll`."""

    def start(self, job: Job, placement: Placement, plan: Plan) -> None: ...

    def stop(self, job_id: str, *, checkpoint: bool) -> None: ...

    def replan(self, job_id: str, placement: Placement, plan: Plan) -> None:
        """Move a running gang to ``plan`` on ``placement`` (in place, or by migrating).

        Raises :class:`ReplanRefused`, having changed nothing, when it cannot: the gang is
        gone, or it cannot take that plan. The cycle asks before it records the new plan.
        """
        ...

    def resize(self, job_id: str, placement: Placement, plan: Plan, worker_batch: int) -> None:
        """Checkpoint the running gang and restart it on ``placement`` with ``plan`` (its
        worker count is the new size), each worker taking ``worker_batch`` samples per
        iteration. Unlike :meth:`replan` it costs a restart.

        Raises :class:`ReplanRefused`, having changed nothing, when the job has no gang (it
        ended or was stopped meanwhile): every executor answers so, and the cycle, which asks
        before it records the resize, then records nothing (no new size, batch or count)."""
        ...

    def poll(self, now: float) -> Sequence[ExecutorEvent]: ...

    def running_jobs(self) -> set[str]:
        """Ids of the gangs the executor holds now (started or starting)."""
        ...

    def next_event_time(self) -> float | None:
        """When the executor will next have something to report, if it can know (simulation)."""
        ...


@runtime_checkable
class KeepsCheckpoints(Protocol):
    """An executor that keeps a job's state (checkpoints) beyond the life of its gangs.

    :func:`jigsaw.scheduling.retention.sweep_checkpoints` asks it which jobs it keeps state for and
    has
    it discard the state of jobs that have finished for good.
    """

    def checkpointed_jobs(self) -> set[str]:
        """Ids of the jobs with stored checkpoints."""
        ...

    def discard_checkpoints(self, job_id: str) -> bool:
        """Delete ``job_id``'s checkpoints; ``False`` (and nothing deleted) while a gang of
        that job, running or stopping, could still write one."""
        ...
