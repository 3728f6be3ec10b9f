"""What the job routes do, apart from HTTP: submit (idempotently), see, cancel."""

from __future__ import annotations

import time

from fastapi import Response

from api.errors import ApiError, not_found
from api.idempotency import Claim, IdempotencyKeys, Replay, request_hash
from api.presenters import job_json
from api.schemas.jobs import JobCreate
from api.state import AppState
from api.store.telemetry import Telemetry
from api.tokens import Principal
from jigsaw.domain import Job, JobEvent, JobSpec, new_job_id, submitted_event, transition
from jigsaw.errors import ConflictError, InvalidSpecError, JobNotFoundError
from jigsaw.lifecycle import JobState
from jigsaw.policies.quota import Quotas

CANCEL_ATTEMPTS = 5


def build_spec(body: JobCreate, principal: Principal) -> JobSpec:
    values = body.model_dump()
    return JobSpec.from_mapping({**values, "user": principal.user})


def check_quota_of(state: AppState, spec: JobSpec) -> None:
    quotas = Quotas(state.settings.queue_quotas, state.settings.user_quotas)
    why = quotas.never_fits(spec)
    if why is not None:
        raise InvalidSpecError(f"workers={spec.workers} can never start: {why}", field="workers")


def submit(
    state: AppState, principal: Principal, body: JobCreate, idempotency_key: str | None
) -> Response:
    spec = build_spec(body, principal)
    check_quota_of(state, spec)
    job = Job(id=new_job_id(), spec=spec, submitted_at=time.time())
    payload = job_json(job)
    event = submitted_event(job, principal.user)
    if idempotency_key is None:
        state.store.add(job, event)
    else:
        keys = IdempotencyKeys(state.engine, ttl_s=state.settings.idempotency_ttl_s)
        outcome = keys.claim(principal.user, idempotency_key, request_hash(body.model_dump()))
        if isinstance(outcome, Replay):
            return json_response(outcome.body, outcome.status, replayed=True)
        _add_claimed(state, keys, outcome, job, event, payload)
    state.metrics.submissions.inc()
    return json_response(payload, 201)


def _add_claimed(
    state: AppState,
    keys: IdempotencyKeys,
    claim: Claim,
    job: Job,
    event: JobEvent,
    payload: bytes,
) -> None:
    try:
        state.store.add(
            job,
            event,
            then=lambda conn: keys.complete(conn, claim, 201, payload, job.id),
        )
    except BaseException:
        keys.release(claim)
        raise


def json_response(body: bytes, status: int, *, replayed: bool = False) -> Response:
    headers = {"Idempotent-Replayed": "true"} if replayed else None
    return Response(body, status_code=status, media_type="application/json", headers=headers)


def last_loss(state: AppState, job: Job) -> float | None:
    """The last reported loss; a job that has not progressed has none (saves a query)."""
    if job.iterations_done <= 0:
        return None
    return Telemetry(state.engine).last_losses([job.id]).get(job.id)


def visible_job(state: AppState, principal: Principal, job_id: str) -> Job:
    """The job, if this principal may see it. Someone else's job is 'not found' (no leak)."""
    try:
        job = state.store.get(job_id)
    except JobNotFoundError:
        raise not_found(job_id) from None
    if not principal.is_admin and job.spec.user != principal.user:
        raise not_found(job_id)
    return job


def cancel(state: AppState, principal: Principal, job_id: str) -> Job:
    for _ in range(CANCEL_ATTEMPTS):
        job = visible_job(state, principal, job_id)
        if job.state.is_terminal:
            raise ApiError(
                409,
                f"job {job_id} already finished ({job.state.value}); there is nothing to cancel",
                state=job.state.value,
            )
        moved, event = transition(
            job,
            JobState.CANCELLED,
            reason=f"cancelled by {principal.user}",
            at=time.time(),
            actor=principal.user,
        )
        try:
            return state.store.save(moved, expected_version=job.version, event=event)
        except ConflictError:
            continue  # the scheduler moved it meanwhile: look again
    raise ApiError(409, f"job {job_id} is changing too fast to cancel; retry the request")
