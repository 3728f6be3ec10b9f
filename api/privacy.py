"""``JIGSAW_PRIVATE_JOBS``: what a non-admin token sees of other users' jobs. Off by default,
as in Slurm.

A hidden job keeps what the view needs (its GPU load, rank and depth, its queue position and
estimate) but its id becomes an alias (``hidden-1``, stable within one answer, so co-located
workers of the same job still group), its name ``another user's job`` and its user
``another user``. That holds in the shared views (queue, scheduler, cluster, packing) and in
what a user's own job says about another's: its reason, ``preempted_by``, events and log lines
(``preempted by j-...``, ``packed into j-...'s slack``). Masking happens when an answer is
built, for its viewer: what is stored keeps the real ids, and admins see them.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from api.schemas.cluster import WorkerPublic
from api.schemas.jobs import JobEventPublic, JobPublic, LogLinePublic
from api.schemas.scheduler import DecisionPublic, QueueEntry
from api.state import AppState
from api.tokens import Principal
from jigsaw.model.errors import JobNotFoundError

HIDDEN_NAME = "another user's job"
HIDDEN_USER = "another user"
_JOB_ID = re.compile(r"\bj-[0-9a-f]{12}\b")


class PrivacyMask:
    """Masks other users' jobs for one viewer in one answer. ``viewer=None``: shows all."""

    def __init__(self, viewer: str | None, owner_of: Callable[[str], str | None]) -> None:
        self._viewer = viewer
        self._owner_of = owner_of
        self._aliases: dict[str, str] = {}

    @property
    def active(self) -> bool:
        return self._viewer is not None

    def hides(self, owner: str | None) -> bool:
        return self._viewer is not None and owner != self._viewer

    def alias(self, job_id: str) -> str:
        if job_id not in self._aliases:
            self._aliases[job_id] = f"hidden-{len(self._aliases) + 1}"
        return self._aliases[job_id]

    def queue_entry(self, entry: QueueEntry) -> QueueEntry:
        if not self.hides(entry.user):
            return entry
        return entry.model_copy(
            update={"job_id": self.alias(entry.job_id), "name": HIDDEN_NAME, "user": HIDDEN_USER}
        )

    def worker(self, worker: WorkerPublic, owner: str) -> WorkerPublic:
        if not self.hides(owner):
            return worker
        return worker.model_copy(
            update={"job_id": self.alias(worker.job_id), "job_name": HIDDEN_NAME}
        )

    def decision(self, decision: DecisionPublic) -> DecisionPublic:
        if not self.active:
            return decision
        return decision.model_copy(
            update={"job_id": self.job_ref(decision.job_id), "reason": self.text(decision.reason)}
        )

    def job_ref(self, job_id: str) -> str:
        """``job_id``, or its alias when it belongs to a job this viewer may not see."""
        return self.alias(job_id) if self.hides(self._owner_of(job_id)) else job_id

    def text(self, text: str) -> str:
        """``text`` with the id of every job this viewer may not see replaced by its alias."""
        return _JOB_ID.sub(self._text_alias, text) if self.active else text

    def job(self, job: JobPublic) -> JobPublic:
        """One of the viewer's own jobs, naming other users' jobs only by alias."""
        if not self.active:
            return job
        by = job.preempted_by
        return job.model_copy(
            update={
                "reason": self.text(job.reason),
                "preempted_by": self.job_ref(by) if by is not None else None,
            }
        )

    def event(self, event: JobEventPublic) -> JobEventPublic:
        if not self.active:
            return event
        return event.model_copy(update={"reason": self.text(event.reason)})

    def log_line(self, line: LogLinePublic) -> LogLinePublic:
        if not self.active:
            return line
        return line.model_copy(update={"line": self.text(line.line)})

    def _text_alias(self, match: re.Match[str]) -> str:
        return self.job_ref(match.group(0))


def privacy_mask(state: AppState, principal: Principal) -> PrivacyMask:
    """The mask for this caller: only non-admin tokens on a private cluster see less."""
    viewer = principal.user if state.settings.private_jobs and not principal.is_admin else None
    owners: dict[str, str | None] = {}

    def owner_of(job_id: str) -> str | None:
        if job_id not in owners:
            try:
                owners[job_id] = state.store.get(job_id).spec.user
            except JobNotFoundError:
                owners[job_id] = None
        return owners[job_id]

    return PrivacyMask(viewer, owner_of)
