"""/api/v1/scheduler: the leader's state and the queue of waiting jobs."""

from __future__ import annotations

import math
import time

from fastapi import APIRouter, Depends

from api.deps import Reader, StateDep, reject_unknown_query
from api.json_body import JsonRoute
from api.privacy import privacy_mask
from api.queue_estimate import estimate_queue
from api.queue_reasons import ClusterNow, waiting_reason
from api.schemas.common import COMMON_ERRORS
from api.schemas.scheduler import DecisionPublic, QueueEntry, QueuePublic, SchedulerPublic
from api.timefmt import iso
from jigsaw.model.domain import Job
from jigsaw.policies.quota import Quotas

router = APIRouter(
    route_class=JsonRoute,
    prefix="/api/v1",
    tags=["scheduler"],
    responses=COMMON_ERRORS,
    dependencies=[Depends(reject_unknown_query)],
)


def heartbeat_fresh(heartbeat_at: float | None, round_seconds: float, now: float) -> bool:
    return heartbeat_at is not None and now - heartbeat_at <= max(3 * round_seconds, 5.0)


@router.get("/scheduler", response_model=SchedulerPublic, operation_id="get_scheduler")
def get_scheduler(principal: Reader, state: StateDep) -> SchedulerPublic:
    """The policy, round counter, leader epoch and the last round's decisions."""
    leader = state.store.leader_state()
    if leader is None:
        return SchedulerPublic(
            policy=None,
            round=0,
            epoch=0,
            leader=False,
            last_round_at=None,
            last_round_latency_s=None,
            last_decisions=[],
        )
    mask = privacy_mask(state, principal)
    return SchedulerPublic(
        policy=leader.policy,
        round=leader.round,
        epoch=leader.epoch,
        leader=heartbeat_fresh(leader.heartbeat_at, state.settings.round_seconds, time.time()),
        last_round_at=iso(leader.last_round_at),
        last_round_latency_s=leader.last_round_latency_s,
        last_decisions=[mask.decision(DecisionPublic(**d)) for d in leader.last_decisions],
    )


@router.get("/scheduler/queue", response_model=QueuePublic, operation_id="get_queue")
def get_queue(principal: Reader, state: StateDep) -> QueuePublic:
    """Waiting jobs in queue order with an *estimated* start (see ``note``) and why each
    waits."""
    now = time.time()
    active = state.store.active_jobs()
    totals = state.store.gpu_totals()
    total = totals.alive if totals.recorded else state.settings.gpus
    observed = state.store.observed_rates(job.id for job in active if job.state.holds_resources)
    quotas = Quotas(state.settings.queue_quotas, state.settings.user_quotas)
    cluster = ClusterNow.of(active, total)
    mask = privacy_mask(state, principal)

    def rate_of(job: Job) -> float:
        return observed.get(job.id) or state.oracle.rate(job.spec, job.plan)

    entries = []
    ahead: str | None = None
    for estimate in estimate_queue(active, total, now, rate_of):
        job = estimate.job
        blocked = never_starts(job, total, quotas)
        start = None if blocked else estimate.start_at
        finite = start is not None and math.isfinite(start)
        wait = max(start - now, 0.0) if finite and start is not None else None
        reason = waiting_reason(
            job, blocked=blocked, ahead=ahead, cluster=cluster, quotas=quotas, now=now
        )
        entries.append(
            mask.queue_entry(
                QueueEntry(
                    job_id=job.id,
                    name=job.spec.name,
                    user=job.spec.user,
                    position=estimate.position,
                    estimated_start_at=iso(start) if finite else None,
                    estimated_wait_s=wait,
                    blocked=blocked,
                    reason=mask.text(reason),
                )
            )
        )
        if blocked is None:  # the scheduler skips a gang that can never start
            shown = mask.alias(job.id) if mask.hides(job.spec.user) else job.spec.name
            ahead = f"{shown} (#{estimate.position})"
    return QueuePublic(items=entries)


def never_starts(job: Job, alive_gpus: int, quotas: Quotas) -> str | None:
    """Why a waiting job cannot start on the cluster as it is (None: it can, in time)."""
    if job.spec.workers > alive_gpus:
        return f"needs {job.spec.workers} GPUs; the cluster has {alive_gpus} alive"
    return quotas.never_fits(job.spec)
