"""Jobs, their specs and the events that record every state change (the checks a spec runs
on construction live in :mod:`jigsaw.model.spec_checks`)."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jigsaw.model.block_noise import BlockNoise
from jigsaw.model.cluster import Placement
from jigsaw.model.errors import IllegalTransitionError, InvalidSpecError
from jigsaw.model.fast_replace import compiled_copy, compiled_new, compiled_replace
from jigsaw.model.lifecycle import JobState, can_transition
from jigsaw.model.plan import Plan, PlanRequest
from jigsaw.model.reasons import ReasonCode, default_code
from jigsaw.model.spec_checks import (
    MAX_ITERATIONS,
    MAX_WORKERS,
    NAME_MAX_LENGTH,
    check_elasticity,
    check_field_types,
    check_optimizer,
    checked_parallelism,
    default_parallelism,
    require,
)


@dataclass(frozen=True, slots=True)
class JobSpec:
    """What a user asks for. Validated on construction, so a JobSpec is always usable."""

    name: str
    model: str
    workers: int
    iterations: int
    priority: int = 0
    spb: str = "auto"
    batch_size: int = 32
    learning_rate: float = 0.05
    seed: int = 0
    queue: str = "default"
    user: str = "anonymous"
    parallelism: str = ""
    """``auto | data | pipeline | hybrid``; empty means the default: ``auto`` for a zoo model,
    ``data`` for anything else (an entrypoint has no profile to predict from; a trace alias
    ran data parallel in its trace)."""
    min_workers: int | None = None
    """Elastic jobs: the fewest workers a policy may run the job on (``None``: ``workers``)."""
    max_workers: int | None = None
    """Elastic jobs: the most workers a policy may give the job (``None``: ``workers``)."""
    batch_policy: str = "fixed"
    """``fixed``: the global batch ``workers * batch_size`` is kept at every size (a resize
    changes speed, never statistics); ``adaptive``: a policy may choose the global batch
    within ``min_global_batch..max_global_batch``."""
    min_global_batch: int | None = None
    """``adaptive`` only: the smallest global batch (samples per iteration, all workers)."""
    max_global_batch: int | None = None
    """``adaptive`` only: the largest global batch."""
    optimizer: str = "sgd"
    """``sgd`` (momentum 0.9) or ``adamw`` (torch's AdamW: betas 0.9 and 0.999, no momentum
    to set). Under ``batch_policy: adaptive`` it picks the learning-rate rule (AdaScale for
    SGD, the square-root rule for AdamW); for AdamW the gradient noise is measured in Adam's
    preconditioned space. Data-parallel engines only: pipeline and hybrid run SGD."""
    plan_request: PlanRequest = field(init=False, repr=False, compare=False)
    """``spb`` parsed once, at construction; ``spb`` itself holds its canonical spelling."""

    def __post_init__(self) -> None:
        require(bool(self.name.strip()), "name", "name must not be empty")
        require(len(self.name) <= NAME_MAX_LENGTH, "name", f"name is over {NAME_MAX_LENGTH} chars")
        require(bool(self.model.strip()), "model", "model must name a zoo model or package.mod:fn")
        require(1 <= self.workers <= MAX_WORKERS, "workers", f"workers must be in 1..{MAX_WORKERS}")
        require(
            1 <= self.iterations <= MAX_ITERATIONS,
            "iterations",
            f"iterations must be in 1..{MAX_ITERATIONS}",
        )
        require(self.batch_size >= 1, "batch_size", "batch_size must be at least 1")
        require(self.learning_rate > 0, "learning_rate", "learning_rate must be positive")
        require(-1000 <= self.priority <= 1000, "priority", "priority must be in -1000..1000")
        request = PlanRequest.parse(self.spb)
        request.check_workers(self.workers)
        object.__setattr__(self, "plan_request", request)
        object.__setattr__(self, "spb", request.text)
        object.__setattr__(self, "parallelism", checked_parallelism(self))
        check_optimizer(self)
        check_elasticity(self)

    @property
    def worker_range(self) -> tuple[int, int]:
        """The fewest and the most workers the job may run on (both ``workers`` unless the
        job is elastic)."""
        low = self.min_workers if self.min_workers is not None else self.workers
        high = self.max_workers if self.max_workers is not None else self.workers
        return low, high

    @property
    def global_batch(self) -> int:
        """Samples per iteration over all workers at the initial size."""
        return self.workers * self.batch_size

    @property
    def batch_range(self) -> tuple[int, int]:
        """The global batches a policy may choose: the initial one alone unless adaptive."""
        if self.batch_policy == "adaptive":
            assert self.min_global_batch is not None and self.max_global_batch is not None
            return self.min_global_batch, self.max_global_batch
        return self.global_batch, self.global_batch

    @property
    def is_elastic(self) -> bool:
        """A policy may change the job's worker count or its global batch."""
        low, high = self.worker_range
        return low < high or self.batch_policy == "adaptive"

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> JobSpec:
        """Build from a YAML/JSON mapping, naming the first unknown or mistyped field."""
        known = set(SPEC_FIELDS)
        unknown = sorted(set(data) - known)
        if unknown:
            raise InvalidSpecError(
                f"unknown field {unknown[0]!r}; known fields: {', '.join(sorted(known))}",
                field=unknown[0],
            )
        for required in ("name", "model", "workers", "iterations"):
            if required not in data:
                raise InvalidSpecError(f"field {required!r} is required", field=required)
        values: dict[str, Any] = dict(data)
        if isinstance(values.get("spb"), list):
            values["spb"] = PlanRequest.parse(values["spb"]).text
        check_field_types(values)
        return cls(**values)

    @classmethod
    def from_stored(cls, data: Mapping[str, Any]) -> JobSpec:
        """Rebuild a spec that was valid when it was stored, without checking it again field
        by field (the store's rows; a submission always goes through the constructor). Only
        the plan request is parsed, which the spec carries parsed."""
        spec = object.__new__(cls)
        for name in SPEC_FIELDS:
            object.__setattr__(spec, name, data.get(name, _DEFAULTS[name]))
        object.__setattr__(spec, "plan_request", PlanRequest.parse(spec.spb))
        if not spec.parallelism:  # stored before the field existed
            object.__setattr__(spec, "parallelism", default_parallelism(spec.model))
        return spec

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in SPEC_FIELDS}


SPEC_FIELDS = tuple(name for name, f in JobSpec.__dataclass_fields__.items() if f.init)
_DEFAULTS: dict[str, Any] = {
    name: f.default for name, f in JobSpec.__dataclass_fields__.items() if f.init
}


@dataclass(frozen=True, slots=True)
class JobEvent:
    """One recorded transition. ``actor`` says who moved it (scheduler, user, executor)."""

    job_id: str
    from_state: JobState | None
    to_state: JobState
    reason: str
    at: float
    actor: str
    code: ReasonCode | str = ""
    """A short machine-readable reason, ``Type/Reason`` as Kueue's conditions have
    (``Preempted/OutrankedBy``, ``Failed/CrashLoop``); empty for events stored before codes."""


@dataclass(frozen=True, slots=True)
class Job:
    """A job as the store holds it. Immutable: changes produce a new Job and a version bump."""

    id: str
    spec: JobSpec
    submitted_at: float
    state: JobState = JobState.PENDING
    version: int = 0
    attempt: int = 0
    iterations_done: float = 0.0
    plan: Plan | None = None
    """The resolved plan of the current (or last) run; ``None`` before the first start."""
    placement: Placement = ()
    started_at: float | None = None
    run_started_at: float | None = None
    finished_at: float | None = None
    attained_gpu_seconds: float = 0.0
    preemptions: int = 0
    failures: int = 0
    reason: str = "submitted"
    retry_after: float | None = None
    """After a failure: the job waits, unscheduled, until this time (back-off)."""
    failure_times: tuple[float, ...] = ()
    """When recent charged failures happened (the crash-loop window counts them)."""
    preempted_by: str | None = None
    """The job the last preemption made room for."""
    model_blocks: int | None = None
    """The model's block count K as a worker reported it (entrypoint models the catalog does
    not know); ``None`` until reported."""
    block_noise: tuple[BlockNoise, ...] = ()
    """The newest smoothed gradient statistics of each block, from the job's lease reports:
    what its online eta is computed from (:mod:`jigsaw.efficiency.online`)."""
    plan_changed_at: float | None = None
    """When the cycle last applied a re-plan to this job."""
    worker_batch: int | None = None
    """Samples each worker takes per iteration in the current run, as the last start or
    resize set it; ``None``: the spec's ``batch_size``."""
    resized_at: float | None = None
    """When the cycle last applied a resize to this job (the elastic rule's hold counts from
    it)."""
    resize_s: float | None = None
    """Seconds the last resize took, from the cycle applying it to the new gang's ``Started``
    report; ``None`` until one is measured, and while a resize is under way."""
    resizes: int = 0
    """Resizes the cycle has applied to this job (Pollux's restart discount counts them; a
    policy reads it, never keeps its own count)."""

    def attained_service(self, now: float) -> float:
        """GPU-seconds received so far, counting the current run up to ``now``."""
        running = 0.0
        if self.run_started_at is not None:
            running = (now - self.run_started_at) * len(self.placement)
        return self.attained_gpu_seconds + max(running, 0.0)

    @property
    def remaining_iterations(self) -> float:
        return max(self.spec.iterations - self.iterations_done, 0.0)

    @property
    def current_worker_batch(self) -> int:
        """Samples per worker per iteration now (the spec's until a policy chose another)."""
        return self.worker_batch if self.worker_batch is not None else self.spec.batch_size


replace_job = compiled_replace(Job)
"""``dataclasses.replace`` for a Job, compiled (:mod:`jigsaw.model.fast_replace`): the store,
the cycle and the simulator copy a Job on every change."""
_copy_job = compiled_copy(Job)
"""``replace_job`` with the changes in a dict (:func:`transition` builds one anyway)."""


def new_job_id() -> str:
    return "j-" + secrets.token_hex(6)


def submitted_event(job: Job, actor: str) -> JobEvent:
    return JobEvent(
        job.id, None, JobState.PENDING, "submitted", job.submitted_at, actor, ReasonCode.SUBMITTED
    )


_new_event = compiled_new(JobEvent)
"""``JobEvent(...)`` with all seven fields, for :func:`transition`."""
_RUNNING, _PREEMPTED, _RETRYING = JobState.RUNNING, JobState.PREEMPTED, JobState.RETRYING
"""Bound once: :func:`transition` runs for every state change of every job."""


def transition(
    job: Job,
    target: JobState,
    *,
    reason: str,
    at: float,
    actor: str,
    code: ReasonCode | None = None,
    **changes: Any,
) -> tuple[Job, JobEvent]:
    """Move ``job`` to ``target`` if the lifecycle table allows it.

    Bookkeeping that every store must agree on (run intervals, attained service, counters)
    happens here, so the in-memory and SQL stores cannot drift apart.
    """
    if not can_transition(job.state, target):
        raise IllegalTransitionError(
            f"job {job.id} cannot go from {job.state} to {target} ({reason})"
        )
    if at < job.submitted_at:
        # The service stamps a round's decisions with the time the round began, and a job
        # submitted while the round read the store is seen by it: nothing happens to a job
        # before it was submitted.
        at = job.submitted_at
    updates: dict[str, Any] = {"state": target, "reason": reason}
    leaving_run = job.state is _RUNNING
    if leaving_run:
        updates["attained_gpu_seconds"] = job.attained_service(at)
        updates["run_started_at"] = None
    if target is _RUNNING:
        updates["run_started_at"] = at
        if job.started_at is None:
            updates["started_at"] = at
    if target is _PREEMPTED:
        updates["preemptions"] = job.preemptions + 1
    if target is _RETRYING:
        updates["failures"] = job.failures + 1
    if target is _PREEMPTED or target is _RETRYING or target.is_terminal:
        updates["placement"] = ()
    if target.is_terminal:
        updates["finished_at"] = at
    updates.update(changes)
    event = _new_event(
        job.id, job.state, target, reason, at, actor, code or default_code(job.state, target)
    )
    return _copy_job(job, updates), event
