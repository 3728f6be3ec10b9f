"""Jobs and events to rows and back. Times stay UNIX seconds, so a round trip is exact."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jigsaw.cluster import Placement
from jigsaw.domain import Job, JobEvent, JobSpec
from jigsaw.lifecycle import JobState


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
        "plan": list(job.plan),
        "placement": [list(gpu) for gpu in job.placement],
        "submitted_at": job.submitted_at,
        "started_at": job.started_at,
        "run_started_at": job.run_started_at,
        "finished_at": job.finished_at,
        "attained_gpu_seconds": job.attained_gpu_seconds,
        "preemptions": job.preemptions,
        "failures": job.failures,
        "reason": job.reason,
        "extra": dict(job.extra),
    }


def placement_of(raw: list[Any]) -> Placement:
    return tuple((int(node), int(gpu)) for node, gpu in raw)


def job_from_row(row: Mapping[Any, Any]) -> Job:
    return Job(
        id=row["id"],
        spec=JobSpec(**row["spec"]),
        submitted_at=row["submitted_at"],
        state=JobState(row["state"]),
        version=row["version"],
        attempt=row["attempt"],
        iterations_done=row["iterations_done"],
        plan=tuple(int(d) for d in row["plan"]),
        placement=placement_of(row["placement"]),
        started_at=row["started_at"],
        run_started_at=row["run_started_at"],
        finished_at=row["finished_at"],
        attained_gpu_seconds=row["attained_gpu_seconds"],
        preemptions=row["preemptions"],
        failures=row["failures"],
        reason=row["reason"],
        extra=dict(row["extra"] or {}),
    )


def event_values(event: JobEvent, epoch: int | None) -> dict[str, Any]:
    return {
        "job_id": event.job_id,
        "from_state": event.from_state.value if event.from_state is not None else None,
        "to_state": event.to_state.value,
        "reason": event.reason,
        "at": event.at,
        "actor": event.actor,
        "epoch": epoch,
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
    )


def event_log_line(event: JobEvent) -> str:
    source = event.from_state.value if event.from_state is not None else "(new)"
    return f"{source} -> {event.to_state.value}: {event.reason} [{event.actor}]"
