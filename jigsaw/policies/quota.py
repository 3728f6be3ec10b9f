"""GPU quotas per queue and per user, enforced at admission.

``QuotaPolicy`` wraps any policy: it hides from the policy the waiting jobs that would push
their queue or user over quota given what already runs, then drops any ``Start`` that would
still exceed a quota together with the other starts of the same round. Quotas count GPUs a
job's workers hold (one per worker). A queue or user without an entry is unlimited.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace

from jigsaw.model.decisions import Decision, Preempt, Start
from jigsaw.model.domain import Job, JobSpec
from jigsaw.model.snapshot import Snapshot
from jigsaw.policies.base import KeepsRoundState, Policy, PolicyBase


@dataclass(frozen=True, slots=True)
class Quotas:
    queues: Mapping[str, int]
    users: Mapping[str, int]

    @property
    def empty(self) -> bool:
        return not self.queues and not self.users

    def limit_violated(self, spec: JobSpec, queue_use: int, user_use: int) -> str | None:
        """Why ``spec`` cannot start on top of the given usage, or ``None`` if it can."""
        queue_limit = self.queues.get(spec.queue)
        if queue_limit is not None and queue_use + spec.workers > queue_limit:
            return f"queue {spec.queue!r} quota is {queue_limit} GPUs ({queue_use} in use)"
        user_limit = self.users.get(spec.user)
        if user_limit is not None and user_use + spec.workers > user_limit:
            return f"user {spec.user!r} quota is {user_limit} GPUs ({user_use} in use)"
        return None

    def never_fits(self, spec: JobSpec) -> str | None:
        """A job larger than its quota would wait forever: refuse it at submission."""
        return self.limit_violated(spec, 0, 0)


class _Usage:
    def __init__(self, running: tuple[Job, ...]) -> None:
        self.queues: Counter[str] = Counter()
        self.users: Counter[str] = Counter()
        for job in running:
            self.add(job.spec, len(job.placement))

    def add(self, spec: JobSpec, gpus: int) -> None:
        self.queues[spec.queue] += gpus
        self.users[spec.user] += gpus


class QuotaPolicy(PolicyBase):
    """Wraps a policy; decides in rounds when it does. It filters the queue, so it promises
    neither an arrival prefix nor a stable interval (the defaults)."""

    def __init__(self, inner: Policy, quotas: Quotas) -> None:
        self.inner = inner
        self.quotas = quotas
        self.name = inner.name
        self.periodic = inner.periodic
        self.resizes_running_jobs = inner.resizes_running_jobs
        self.sizes_elastic_jobs = inner.sizes_elastic_jobs

    def end_round(self, snapshot: Snapshot) -> None:
        """The inner policy's, with the snapshot it decided from."""
        if isinstance(self.inner, KeepsRoundState):
            self.inner.end_round(self._admissible(snapshot, _Usage(snapshot.running)))

    def _admissible(self, snapshot: Snapshot, usage: _Usage) -> Snapshot:
        """``snapshot`` without the waiting jobs their quota does not let start."""
        admissible = tuple(
            job
            for job in snapshot.waiting
            if self.quotas.limit_violated(
                job.spec, usage.queues[job.spec.queue], usage.users[job.spec.user]
            )
            is None
        )
        return replace(snapshot, waiting=admissible)

    def decide(self, snapshot: Snapshot) -> list[Decision]:
        usage = _Usage(snapshot.running)
        decisions = self.inner.decide(self._admissible(snapshot, usage))
        by_id = {job.id: job for job in snapshot.running + snapshot.waiting}
        for decision in decisions:
            if isinstance(decision, Preempt) and decision.job_id in by_id:
                job = by_id[decision.job_id]
                usage.add(job.spec, -len(job.placement))
        kept: list[Decision] = []
        for decision in decisions:
            if isinstance(decision, Start) and decision.job_id in by_id:
                spec = by_id[decision.job_id].spec
                if self.quotas.limit_violated(
                    spec, usage.queues[spec.queue], usage.users[spec.user]
                ):
                    continue
                usage.add(spec, len(decision.placement))
            kept.append(decision)
        return kept
