"""Jobs and events to rows and back. Times stay UNIX seconds, so a round trip is exact."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jigsaw.model.block_noise import parse_block_noise
from jigsaw.model.cluster import Placement
from jigsaw.model.domain import Job, JobEvent, JobSpec
from jigsaw.model.lifecycle import JobState
from jigsaw.model.plan import Plan, plan_from_json, plan_to_json


def job_values(job: Job) -> dict[str, Any]:
    """Every column of ``jobs`` except ``id``, ``version``, ``epoch`` and ``updated_at``."""
    spec = job.spec
    return {
        "name": spec.name,
        "username": spec.user,
        "queue": spec.queue,
        "state": job.state.value,
        "priority": spec.priority,
        "spec": spec.to_dict(),
        "attempt": job.attempt,
        "iterations": spec.iterations,
        "iterations_done": job.iterations_done,
        "plan": plan_to_json(job.plan) if job.plan is not None else None,
        "placement": [list(gpu) for gpu in job.placement],
        "submitted_at": job.submitted_at,
        "started_at": job.started_at,
        "run_started_at": job.run_started_at,
        "finished_at": job.finished_at,
        "attained_gpu_seconds": job.attained_gpu_seconds,
        "preemptions": job.preemptions,
        "failures": job.failures,
        "reason": job.reason,
        "plan_changed_at": job.plan_changed_at,
        "worker_batch": job.worker_batch,
        "optimizer": spec.optimizer,
        "extra": _typed_state(job),
    }


def _typed_state(job: Job) -> dict[str, Any]:
    """The job's typed retry, preemption and model facts, stored in the ``extra`` column."""
    state: dict[str, Any] = {}
    if job.retry_after is not None:
        state["retry_after"] = job.retry_after
    if job.failure_times:
        state["failure_times"] = list(job.failure_times)
    if job.preempted_by is not None:
        state["preempted_by"] = job.preempted_by
    if job.model_blocks is not None:
        state["model_blocks"] = job.model_blocks
    if job.block_noise:
        state["block_noise"] = [entry.as_dict() for entry in job.block_noise]
    for name in ("resized_at", "resize_s"):
        if getattr(job, name) is not None:
            state[name] = getattr(job, name)
    if job.resizes:
        state["resizes"] = job.resizes
    return state


def plan_from_column(raw: Any) -> Plan | None:
    """The ``plan`` column (a :func:`~jigsaw.model.plan.plan_to_json` object, or JSON null)."""
    return plan_from_json(raw) if raw else None


def spec_from_column(raw: Mapping[str, Any]) -> JobSpec:
    """The ``spec`` column; written from a valid spec, so it is not checked again."""
    return JobSpec.from_stored(raw)


def placement_of(raw: list[Any]) -> Placement:
    return tuple((int(node), int(gpu)) for node, gpu in raw)


def job_from_row(row: Mapping[Any, Any]) -> Job:
    return Job(
        id=row["id"],
        spec=spec_from_column(row["spec"]),
        submitted_at=row["submitted_at"],
        state=JobState(row["state"]),
        version=row["version"],
        attempt=row["attempt"],
        iterations_done=row["iterations_done"],
        plan=plan_from_column(row["plan"]),
        placement=placement_of(row["placement"]),
        started_at=row["started_at"],
        run_started_at=row["run_started_at"],
        finished_at=row["finished_at"],
        attained_gpu_seconds=row["attained_gpu_seconds"],
        preemptions=row["preemptions"],
        failures=row["failures"],
        reason=row["reason"],
        plan_changed_at=row["plan_changed_at"],
        worker_batch=row["worker_batch"],
        **_typed_fields(row["extra"] or {}),
    )


def _typed_fields(state: Mapping[str, Any]) -> dict[str, Any]:
    retry_after = state.get("retry_after")
    preempted_by = state.get("preempted_by")
    model_blocks = state.get("model_blocks")
    return {
        "retry_after": float(retry_after) if retry_after is not None else None,
        "failure_times": tuple(float(t) for t in state.get("failure_times", ())),
        "preempted_by": str(preempted_by) if preempted_by is not None else None,
        "model_blocks": int(model_blocks) if model_blocks is not None else None,
        "block_noise": parse_block_noise(state["block_noise"], origin="stored job")
        if state.get("block_noise")
        else (),
        **{name: float(state[name]) for name in ("resized_at", "resize_s") if name in state},
        "resizes": int(state.get("resizes", 0)),
    }


def event_values(event: JobEvent, epoch: int | None) -> dict[str, Any]:
    return {
        "job_id": event.job_id,
        "from_state": event.from_state.value if event.from_state is not None else None,
        "to_state": event.to_state.value,
        "reason": event.reason,
        "at": event.at,
        "actor": event.actor,
        "epoch": epoch,
        "code": str(event.code),
    }


def event_from_row(row: Mapping[Any, Any]) -> JobEvent:
    source = row["from_state"]
    return JobEvent(
        job_id=row["job_id"],
        from_state=JobState(source) if source is not None else None,
        to_state=JobState(row["to_state"]),
        reason=row["reason"],
        at=row["at"],
        actor=row["actor"],
        code=row["code"] or "",
    )


def event_log_line(event: JobEvent) -> str:
    source = event.from_state.value if event.from_state is not None else "(new)"
    return f"{source} -> {event.to_state.value}: {event.reason} [{event.actor}]"
