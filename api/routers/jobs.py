"""/api/v1/jobs: submit, validate, list, inspect, cancel."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Header, Query, Response

from api import jobs_service
from api.deps import StateDep, Submitter, reject_unknown_query
from api.errors import ApiError
from api.idempotency import MAX_KEY_LENGTH
from api.json_body import JsonRoute
from api.presenters import eta_public, event_public, job_public, plan_types_public
from api.privacy import privacy_mask
from api.queue_view import queue_view
from api.routers.time_params import parse_since
from api.schemas.common import COMMON_ERRORS, NO_CONTROL_CHARACTERS, NOT_FOUND, ErrorBody
from api.schemas.jobs import (
    JobCreate,
    JobEventList,
    JobList,
    JobPublic,
    JobValidation,
    PredictionPublic,
)
from api.store.telemetry import Telemetry
from jigsaw.model.lifecycle import JobState
from jigsaw.model.plan import SPBPlan, plan_to_json
from jigsaw.scheduling.seams import JOB_SORT_KEYS

router = APIRouter(
    route_class=JsonRoute,
    prefix="/api/v1",
    tags=["jobs"],
    responses=COMMON_ERRORS,
    dependencies=[Depends(reject_unknown_query)],
)

IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=MAX_KEY_LENGTH,
        pattern=r"^[\x21-\x7e]+$",
        description="retries with the same key replay the first response (kept >= 24 h)",
    ),
]


@router.post(
    "/jobs",
    status_code=201,
    response_model=JobPublic,
    operation_id="submit_job",
    responses={
        409: {
            "model": ErrorBody,
            "description": "a request with the same Idempotency-Key is in flight, or its server "
            "died before the job was stored: retry; the claim is taken over after 60 s",
        },
        422: {
            "model": ErrorBody,
            "description": "invalid job (`field` names what to fix), or an Idempotency-Key "
            "already used with another body (`field` is `Idempotency-Key`)",
        },
    },
)
def submit_job(
    body: JobCreate, principal: Submitter, state: StateDep, idempotency_key: IdempotencyKey = None
) -> Response:
    """Submit a job. The user is the token's; `Idempotency-Key` makes retries safe."""
    outcome = jobs_service.submit(state, principal, body, idempotency_key)
    return json_response(outcome.body, outcome.status, replayed=outcome.replayed)


@router.post(
    "/jobs:validate",
    response_model=JobValidation,
    operation_id="validate_job",
)
def validate_job(body: JobCreate, principal: Submitter, state: StateDep) -> JobValidation:
    """Check a spec and show its resolved plan and the oracle's prediction; stores nothing."""
    spec = jobs_service.checked_spec(state, body, principal)
    # An entrypoint: its K and its plan are checked at the first lease; full backprop shown.
    plan = state.planner.spec_plan(spec)
    spb_auto = spec.spb == "auto" and isinstance(plan, SPBPlan)
    note = "; spb=auto: the policy picks the plan at start" if spb_auto else ""
    prediction = state.oracle.predict(spec, plan)
    return JobValidation(
        spec=spec.to_dict(),
        plan=list(plan.depths) if isinstance(plan, SPBPlan) else [],
        plan_kind=plan.kind,
        plan_detail=plan_to_json(plan),
        plan_types=plan_types_public(spec, state.planner),
        num_blocks=state.planner.model_blocks(spec.model),
        prediction=PredictionPublic(
            iteration_time_s=prediction.iteration_time_s,
            per_worker_memory_bytes=prediction.per_worker_memory_bytes,
            per_worker_compute_s=prediction.per_worker_compute_s,
            per_worker_bytes_sent=prediction.per_worker_bytes_sent,
            source=prediction.source + note,
        ),
    )


SORT_PATTERN = f"^-?({'|'.join(JOB_SORT_KEYS)})$"


@router.get("/jobs", response_model=JobList, operation_id="list_jobs")
def list_jobs(
    principal: Submitter,
    state: StateDep,
    states: Annotated[list[JobState] | None, Query(alias="state")] = None,
    user: Annotated[
        str | None, Query(min_length=1, max_length=128, pattern=NO_CONTROL_CHARACTERS)
    ] = None,
    queue: Annotated[
        str | None, Query(min_length=1, max_length=128, pattern=NO_CONTROL_CHARACTERS)
    ] = None,
    name: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=128,
            pattern=NO_CONTROL_CHARACTERS,
            description="the whole name, case-insensitively; `*` matches any run of characters",
        ),
    ] = None,
    since: Annotated[
        str | None,
        Query(
            max_length=64,
            description="ISO-8601 time: only jobs submitted at or after it",
            json_schema_extra={"format": "date-time"},
        ),
    ] = None,
    sort: Annotated[
        str,
        Query(
            pattern=SORT_PATTERN,
            description=f"one of {', '.join(JOB_SORT_KEYS)}; a leading `-` sorts descending "
            "(ties: by submission time, in the same direction)",
        ),
    ] = "-submitted",
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    offset: Annotated[int, Query(ge=0, le=10**9)] = 0,
) -> JobList:
    """Jobs, newest first unless `sort` says otherwise. Users see their own; admins
    everyone's (filter with `user`). A waiting job carries `waiting`, as the queue shows it."""
    if not principal.is_admin:
        if user is not None and user != principal.user:
            raise ApiError(
                403,
                "users can list only their own jobs; leave out query parameter 'user'",
                field="user",
            )
        user = principal.user
    submitted_since = parse_since(since) if since is not None else None
    store = state.store
    found = store.list_jobs(
        states=states,
        user=user,
        queue=queue,
        name=name,
        since=submitted_since,
        sort=sort,
        limit=limit,
        offset=offset,
    )
    total = store.count_jobs(
        states=states, user=user, queue=queue, name=name, since=submitted_since
    )
    losses = Telemetry(state.engine).last_losses([job.id for job in found])
    mask = privacy_mask(state, principal)
    waits = queue_view(state, mask).entries if any(j.state.is_waiting for j in found) else {}
    return JobList(
        items=[
            mask.job(
                job_public(
                    job,
                    losses.get(job.id),
                    eta_public(job, state.oracle),
                    waiting=waits.get(job.id),
                )
            )
            for job in found
        ],
        total=total,
        limit=limit,
        offset=offset,
    )


@router.get(
    "/jobs/{job_id}",
    response_model=JobPublic,
    operation_id="get_job",
    responses=NOT_FOUND,
)
def get_job(job_id: str, principal: Submitter, state: StateDep) -> Response:
    """A job; a waiting one with its place in the queue (``waiting``), a running one with its
    rate and time left, an elastic one with why it has or has not been resized."""
    job = jobs_service.visible_job(state, principal, job_id)
    mask = privacy_mask(state, principal)
    # Serialized once here; returning a Response skips FastAPI's second validation pass.
    eta = eta_public(job, state.oracle)
    plan_types = plan_types_public(job.spec, state.planner)
    waiting = queue_view(state, mask).entries.get(job.id) if job.state.is_waiting else None
    rate = state.store.observed_rates([job.id]).get(job.id) if job.state.holds_resources else None
    shown = job_public(
        job,
        jobs_service.last_loss(state, job),
        eta,
        plan_types,
        waiting=waiting,
        rate=rate,
        resizing=jobs_service.resize_story(state, job, rate),
    )
    body = mask.job(shown).model_dump_json().encode()
    return json_response(body, 200)


def json_response(body: bytes, status: int, *, replayed: bool = False) -> Response:
    headers = {"Idempotent-Replayed": "true"} if replayed else None
    return Response(body, status_code=status, media_type="application/json", headers=headers)


@router.post(
    "/jobs/{job_id}/cancel",
    response_model=JobPublic,
    operation_id="cancel_job",
    responses={
        **NOT_FOUND,
        409: {"model": ErrorBody, "description": "already finished; `state` says how"},
    },
)
def cancel_job(job_id: str, principal: Submitter, state: StateDep) -> JobPublic:
    """Cancel a job that has not finished. Its gang stops at the next scheduling round."""
    job = jobs_service.cancel(state, principal, job_id)
    shown = job_public(job, jobs_service.last_loss(state, job), eta_public(job, state.oracle))
    return privacy_mask(state, principal).job(shown)


@router.get(
    "/jobs/{job_id}/events",
    response_model=JobEventList,
    operation_id="list_job_events",
    responses=NOT_FOUND,
)
def list_job_events(job_id: str, principal: Submitter, state: StateDep) -> JobEventList:
    """Every state transition, with its reason, time and actor."""
    jobs_service.visible_job(state, principal, job_id)
    mask = privacy_mask(state, principal)
    return JobEventList(items=[mask.event(event_public(e)) for e in state.store.events(job_id)])
