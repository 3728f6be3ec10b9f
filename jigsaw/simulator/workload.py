"""Turning trace records into the jobs a replay submits."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from jigsaw.model.domain import JobSpec
from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.spec_checks import MAX_ITERATIONS, NAME_MAX_LENGTH
from jigsaw.oracle import Oracle
from jigsaw.traces import TraceJob, load_trace

PHILLY_HEADER = "timestamp,duration,num_gpus"


@dataclass(frozen=True, slots=True)
class Arrival:
    job_id: str
    at: float
    spec: JobSpec
    trace: TraceJob


def is_philly(path: Path) -> bool:
    if path.suffix.lower() != ".csv":
        return False
    with path.open() as handle:
        return handle.readline().strip().replace(" ", "").startswith(PHILLY_HEADER)


def read_workload(
    path: Path,
    *,
    oracle: Oracle,
    gpus_per_node: int,
    seed: int = 0,
    limit: int | None = None,
    start: str | None = None,
    end: str | None = None,
) -> list[TraceJob]:
    """Any supported trace; ``start``/``end`` select a Philly date window."""
    if not path.is_file():
        raise InvalidSpecError(f"trace {path} does not exist or is not a file", field="trace")
    if is_philly(path):
        return load_trace(
            path,
            start=start,
            end=end,
            limit=limit,
            seed=seed,
            oracle=oracle,
            gpus_per_node=gpus_per_node,
        )
    if start is not None or end is not None:
        raise InvalidSpecError(
            "--start/--end select a date window of a Philly trace only", field="start"
        )
    jobs = load_trace(path)
    return jobs[:limit] if limit is not None else jobs


def priority_from_weight(weight: float) -> int:
    """Trace priority weights (1 = normal) to JobSpec priorities (0 = normal); inverse of
    :func:`jigsaw.policies.shared.fairness.priority_weight`."""
    if weight >= 1.0:
        return min(round(weight - 1.0), 1000)
    return -min(round(1.0 / max(weight, 1e-3) - 1.0), 1000)


def arrivals_from_trace(
    jobs: Sequence[TraceJob], reference_rate: Callable[[TraceJob], float]
) -> list[Arrival]:
    """Specs for every trace job, in (submit time, trace order).

    A job given only by duration runs ``duration x reference_rate`` iterations.
    """
    ids = [job.id for job in jobs]
    unique = len(set(ids)) == len(ids)
    arrivals = []
    for index, job in enumerate(jobs):
        iterations = job.iterations
        if iterations is None:
            if job.duration_s is None:
                raise InvalidSpecError(f"{job.source}: job has neither iterations nor duration")
            iterations = max(1, round(job.duration_s * reference_rate(job)))
        job_id = job.id if unique else f"{job.id}#{index}"
        spec = JobSpec(
            name=job.id[:NAME_MAX_LENGTH],
            model=job.model,
            workers=job.num_workers,
            iterations=min(max(int(iterations), 1), MAX_ITERATIONS),
            priority=priority_from_weight(job.priority),
            spb=job.spb or "auto",
            parallelism=job.parallelism or "data",
            batch_size=job.batch_size,
            user=job.user or "trace",
            **(job.elasticity.spec_fields() if job.elasticity is not None else {}),
        )
        arrivals.append(Arrival(job_id, job.submit_time_s, spec, job))
    arrivals.sort(key=lambda a: a.at)
    return arrivals
