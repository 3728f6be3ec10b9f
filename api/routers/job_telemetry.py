"""/api/v1/jobs/{id}/progress and /logs: what a running job reports."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from api import jobs_service
from api.deps import StateDep, Submitter, reject_unknown_query
from api.json_body import JsonRoute
from api.presenters import sample_public
from api.privacy import privacy_mask
from api.routers.time_params import parse_since
from api.schemas.common import COMMON_ERRORS, NOT_FOUND
from api.schemas.jobs import LogLinePublic, LogList, ProgressList
from api.store.telemetry import Telemetry
from api.timefmt import iso

router = APIRouter(
    route_class=JsonRoute,
    prefix="/api/v1",
    tags=["jobs"],
    responses=COMMON_ERRORS,
    dependencies=[Depends(reject_unknown_query)],
)

MAX_PAGE = 5000


@router.get(
    "/jobs/{job_id}/progress",
    response_model=ProgressList,
    operation_id="get_job_progress",
    responses=NOT_FOUND,
)
def get_job_progress(
    job_id: str,
    principal: Submitter,
    state: StateDep,
    after_iteration: Annotated[float | None, Query(allow_inf_nan=False)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 1000,
) -> ProgressList:
    """Progress samples (iteration, loss, throughput, plan, metrics), oldest first."""
    jobs_service.visible_job(state, principal, job_id)
    rows = Telemetry(state.engine).progress(job_id, after_iteration=after_iteration, limit=limit)
    return ProgressList(items=[sample_public(row) for row in rows])


@router.get(
    "/jobs/{job_id}/logs",
    response_model=LogList,
    operation_id="get_job_logs",
    responses=NOT_FOUND,
)
def get_job_logs(
    job_id: str,
    principal: Submitter,
    state: StateDep,
    after: Annotated[int, Query(ge=0, le=2**62)] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 1000,
    tail: Annotated[
        int | None, Query(ge=1, le=MAX_PAGE, description="only the last this many lines")
    ] = None,
    since: Annotated[
        str | None,
        Query(
            max_length=64,
            description="ISO-8601 time: only lines written at or after it",
            json_schema_extra={"format": "date-time"},
        ),
    ] = None,
) -> LogList:
    """Log lines (transitions, progress at lease boundaries, worker lines) after ``after``,
    oldest first; ``tail`` keeps the newest ones, ``since`` the recent ones."""
    start = parse_since(since) if since is not None else None
    jobs_service.visible_job(state, principal, job_id)
    lines = Telemetry(state.engine).logs(job_id, after=after, limit=limit, since=start, tail=tail)
    mask = privacy_mask(state, principal)
    return LogList(
        items=[
            mask.log_line(LogLinePublic(seq=line.seq, at=iso(line.at), line=line.line))
            for line in lines
        ],
        next=lines[-1].seq if lines else after,
    )
