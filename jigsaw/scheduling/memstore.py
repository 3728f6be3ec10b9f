"""An in-memory Store for the simulator and unit tests. Same contract as the SQL store."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from operator import attrgetter
from typing import Any

from jigsaw.model.domain import Job, JobEvent, replace_job
from jigsaw.model.errors import ConflictError, JobNotFoundError
from jigsaw.model.lifecycle import JobState, sources_of
from jigsaw.scheduling.active_sides import (
    HOLDING_STATES,
    ActiveSides,
    ArrivalOrdered,
)
from jigsaw.scheduling.seams import name_matcher, parsed_sort

_SORT_VALUES: dict[str, Callable[[Job], Any]] = {
    "submitted": lambda job: job.submitted_at,
    "name": lambda job: job.spec.name,
    "user": lambda job: job.spec.user,
    "queue": lambda job: job.spec.queue,
    "state": lambda job: job.state.value,
    "priority": lambda job: job.spec.priority,
}
"""The value :meth:`InMemoryStore.list_jobs` sorts by, per key of ``JOB_SORT_KEYS``."""


_ARRIVAL_KEY = attrgetter("submitted_at", "id")


class InMemoryStore:
    def __init__(self, *, keep_events: bool = True) -> None:
        self._jobs: dict[str, Job] = {}
        self._holding = ArrivalOrdered()
        self._waiting = ArrivalOrdered()
        """The active jobs by side, each in arrival order, kept on every save so that a
        round's snapshot neither walks nor sorts them (:meth:`active_sides`)."""
        self._backing_off: set[str] = set()
        """Waiting jobs whose record carries a ``retry_after``."""
        self._events: dict[str, list[JobEvent]] = {}
        self._keep_events = keep_events

    def add(self, job: Job, event: JobEvent) -> Job:
        if job.id in self._jobs:
            raise ConflictError(f"job {job.id} already exists")
        self._jobs[job.id] = job
        self._enter(job)
        self._record(event)
        return job

    def get(self, job_id: str) -> Job:
        try:
            return self._jobs[job_id]
        except KeyError:
            raise JobNotFoundError(job_id) from None

    def active_jobs(self) -> list[Job]:
        return list(heapq.merge(self._holding.jobs(), self._waiting.jobs(), key=_ARRIVAL_KEY))

    def active_sides(self) -> ActiveSides:
        return ActiveSides(self._holding.jobs(), self._waiting.jobs(), bool(self._backing_off))

    def active_count(self) -> int:
        """``len(active_jobs())`` without the list (the replay asks after every event)."""
        return len(self._holding) + len(self._waiting)

    def all_jobs(self) -> list[Job]:
        return list(self._jobs.values())

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
        key, descending = parsed_sort(sort)
        named = name_matcher(name) if name is not None else None
        wanted = set(states) if states is not None else None
        jobs = [
            job
            for job in self._jobs.values()
            if (wanted is None or job.state in wanted)
            and (user is None or job.spec.user == user)
            and (queue is None or job.spec.queue == queue)
            and (named is None or named.fullmatch(job.spec.name) is not None)
            and (since is None or job.submitted_at >= since)
        ]
        jobs.sort(key=lambda j: (_SORT_VALUES[key](j), j.submitted_at, j.id), reverse=descending)
        return jobs[offset : offset + limit]

    def count_jobs(
        self,
        *,
        states: Iterable[JobState] | None = None,
        user: str | None = None,
        queue: str | None = None,
        name: str | None = None,
        since: float | None = None,
    ) -> int:
        everything = len(self._jobs)
        return len(
            self.list_jobs(
                states=states, user=user, queue=queue, name=name, since=since, limit=everything
            )
        )

    def save(self, job: Job, *, expected_version: int, event: JobEvent | None = None) -> Job:
        current = self.get(job.id)
        if current.version != expected_version:
            raise ConflictError(
                f"job {job.id} changed meanwhile (version {current.version}, "
                f"expected {expected_version})"
            )
        if event is not None and current.state not in sources_of(event.to_state):
            raise ConflictError(
                f"job {job.id} is {current.state}, not a source of {event.to_state}"
            )
        version = current.version + 1
        # A record that already carries the next version (the cycle's transitions do) is
        # stored as it is: it is a new object all the same, and one copy fewer per change.
        saved = job if job.version == version else replace_job(job, version=version)
        self._jobs[job.id] = saved
        self._leave(current, saved)
        self._enter(saved)
        if event is not None:
            self._record(event)
        return saved

    def _side(self, job: Job) -> ArrivalOrdered | None:
        if job.state.is_terminal:
            return None
        return self._holding if job.state in HOLDING_STATES else self._waiting

    def _enter(self, job: Job) -> None:
        side = self._side(job)
        if side is None:
            return
        side.put(job)  # in place when the job was on this side already
        if side is self._waiting and job.retry_after is not None:
            self._backing_off.add(job.id)

    def _leave(self, old: Job, new: Job) -> None:
        """Takes ``old``'s record off its side when ``new`` is on another (or none)."""
        side = self._side(old)
        if side is not None and side is not self._side(new):
            side.remove(old)
        self._backing_off.discard(old.id)

    def events(self, job_id: str) -> list[JobEvent]:
        self.get(job_id)
        return list(self._events.get(job_id, ()))

    def _record(self, event: JobEvent) -> None:
        if self._keep_events:
            self._events.setdefault(event.job_id, []).append(event)
