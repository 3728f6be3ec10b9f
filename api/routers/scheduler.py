"""/api/v1/scheduler: the leader's state and the queue of waiting jobs."""

from __future__ import annotations

import time

from fastapi import APIRouter, Depends

from api.deps import Reader, StateDep, reject_unknown_query
from api.json_body import JsonRoute
from api.privacy import privacy_mask
from api.queue_view import queue_view
from api.schemas.common import COMMON_ERRORS
from api.schemas.scheduler import DecisionPublic, QueuePublic, SchedulerPublic
from api.timefmt import iso

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
    """Waiting jobs in the order the policy takes them (``order`` says how), with an
    *estimated* start (see ``note``) and why each waits."""
    view = queue_view(state, privacy_mask(state, principal))
    return QueuePublic(items=list(view.entries.values()), order=view.order)
