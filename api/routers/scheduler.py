"""/api/v1/scheduler: the leader's state and the queue of waiting jobs."""

from __future__ import annotations

import math
import time

from fastapi import APIRouter, Depends
from sqlalchemy import select

from api.deps import Reader, StateDep, reject_unknown_query
from api.models import nodes, progress_samples, scheduler_leader
from api.queue_estimate import estimate_queue
from api.schemas.common import COMMON_ERRORS
from api.schemas.scheduler import DecisionPublic, QueueEntry, QueuePublic, SchedulerPublic
from api.timefmt import iso
from jigsaw.domain import Job

router = APIRouter(
    prefix="/api/v1",
    tags=["scheduler"],
    responses=COMMON_ERRORS,
    dependencies=[Depends(reject_unknown_query)],
)


def heartbeat_fresh(heartbeat_at: float | None, round_seconds: float, now: float) -> bool:
    return heartbeat_at is not None and now - heartbeat_at <= max(3 * round_seconds, 5.0)


@router.get("/scheduler", response_model=SchedulerPublic, operation_id="get_scheduler")
def get_scheduler(_principal: Reader, state: StateDep) -> SchedulerPublic:
    """The policy, round counter, leader epoch and the last round's decisions."""
    with state.engine.connect() as conn:
        row = conn.execute(select(scheduler_leader)).mappings().first()
    if row is None:
        return SchedulerPublic(
            policy=None,
            round=0,
            epoch=0,
            leader=False,
            last_round_at=None,
            last_round_latency_s=None,
            last_decisions=[],
        )
    return SchedulerPublic(
        policy=row["policy"],
        round=row["round"],
        epoch=row["epoch"],
        leader=heartbeat_fresh(row["heartbeat_at"], state.settings.round_seconds, time.time()),
        last_round_at=iso(row["last_round_at"]),
        last_round_latency_s=row["last_round_latency_s"],
        last_decisions=[DecisionPublic(**d) for d in row["last_decisions"] or []],
    )


@router.get("/scheduler/queue", response_model=QueuePublic, operation_id="get_queue")
def get_queue(_principal: Reader, state: StateDep) -> QueuePublic:
    """Waiting jobs in queue order with an *estimated* start (see ``note``)."""
    now = time.time()
    active = state.store.active_jobs()
    with state.engine.connect() as conn:
        total = sum(
            row.num_gpus
            for row in conn.execute(select(nodes.c.num_gpus, nodes.c.alive))
            if row.alive
        )
        observed = _observed_rates(conn, [job.id for job in active if job.state.holds_resources])
    if total == 0:
        total = state.settings.gpus

    def rate_of(job: Job) -> float:
        return observed.get(job.id) or state.oracle.rate(job.spec, job.plan)

    entries = []
    for estimate in estimate_queue(active, total, now, rate_of):
        start = estimate.start_at
        finite = start is not None and math.isfinite(start)
        entries.append(
            QueueEntry(
                job_id=estimate.job.id,
                name=estimate.job.spec.name,
                user=estimate.job.spec.user,
                position=estimate.position,
                estimated_start_at=iso(start) if finite else None,
                estimated_wait_s=max(start - now, 0.0) if finite and start is not None else None,
            )
        )
    return QueuePublic(items=entries)


def _observed_rates(conn: object, job_ids: list[str]) -> dict[str, float]:
    """Iterations per second each running job last reported, where it did."""
    if not job_ids:
        return {}
    latest = (
        select(progress_samples.c.job_id, progress_samples.c.metrics)
        .where(progress_samples.c.job_id.in_(job_ids))
        .order_by(progress_samples.c.id.desc())
        .limit(len(job_ids) * 4)
    )
    rates: dict[str, float] = {}
    for row in conn.execute(latest):  # type: ignore[attr-defined]
        value = (row.metrics or {}).get("iterations_per_s")
        if row.job_id not in rates and isinstance(value, int | float) and value > 0:
            rates[row.job_id] = float(value)
    return rates
