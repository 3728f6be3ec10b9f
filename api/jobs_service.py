"""What the job routes do, apart from HTTP: submit (idempotently), see, cancel."""

from __future__ import annotations

import time
from dataclasses import dataclass

from api import resize_view
from api.elastic_checks import check_elastic
from api.errors import ApiError, not_found
from api.idempotency import Claim, IdempotencyKeys, Replay, request_hash
from api.presenters import eta_public, job_json, plan_types_public
from api.queue_reasons import ClusterNow
from api.schemas.jobs import JobCreate
from api.state import AppState
from api.store.telemetry import Telemetry
from api.submission_checks import check_submission
from api.tokens import Principal
from jigsaw.model.domain import Job, JobEvent, JobSpec, new_job_id, submitted_event, transition
from jigsaw.model.errors import ConflictError, JobNotFoundError
from jigsaw.model.lifecycle import JobState
from jigsaw.policies.quota import Quotas

CANCEL_ATTEMPTS = 5
INVENTORY_MAX_AGE_S = 1.0
"""The cluster size a submission is checked against may be this old (saves a query)."""


@dataclass(frozen=True, slots=True)
class Submitted:
    """The answer to a submission: the job's JSON, or the stored answer a key replays."""

    status: int
    body: bytes
    replayed: bool = False


def build_spec(body: JobCreate, principal: Principal) -> JobSpec:
    values = body.model_dump()
    if values.get("parallelism") is None:
        values.pop("parallelism", None)  # the spec's default depends on the model
    return JobSpec.from_mapping({**values, "user": principal.user})


def checked_spec(state: AppState, body: JobCreate, principal: Principal) -> JobSpec:
    """The spec, once it passed every check a submission must pass (api/submission_checks.py,
    the plan's rules asked of the app's one planner). The one path ``submit`` and
    ``jobs:validate`` share; neither keeps a plan of its own: the policy asks the same
    planner at start, which still holds the plan-type choice it checked."""
    spec = build_spec(body, principal)
    totals = state.store.gpu_totals(max_age_s=INVENTORY_MAX_AGE_S)
    quotas = Quotas(state.settings.queue_quotas, state.settings.user_quotas)
    check_submission(
        spec,
        state.planner,
        cluster_gpus=totals.recorded or state.settings.gpus,
        why_never_fits=quotas.never_fits(spec),
    )
    check_elastic(
        spec,
        state.planner.typed_plan(spec),
        cluster_gpus=totals.recorded or state.settings.gpus,
        quotas=quotas,
    )
    return spec


def submit(
    state: AppState, principal: Principal, body: JobCreate, idempotency_key: str | None
) -> Submitted:
    spec = checked_spec(state, body, principal)
    job = Job(id=new_job_id(), spec=spec, submitted_at=time.time())
    payload = job_json(
        job, eta=eta_public(job, state.oracle), plan_types=plan_types_public(spec, state.planner)
    )
    event = submitted_event(job, principal.user)
    if idempotency_key is None:
        state.store.add(job, event)
    else:
        keys = IdempotencyKeys(state.engine, ttl_s=state.settings.idempotency_ttl_s)
        outcome = keys.claim(principal.user, idempotency_key, request_hash(body.model_dump()))
        if isinstance(outcome, Replay):
            return Submitted(outcome.status, outcome.body, replayed=True)
        _add_claimed(state, keys, outcome, job, event, payload)
    state.metrics.submissions.inc()
    return Submitted(201, payload)


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


def last_loss(state: AppState, job: Job) -> float | None:
    """The last reported loss; a job that has not progressed has none (saves a query)."""
    if job.iterations_done <= 0:
        return None
    return Telemetry(state.engine).last_losses([job.id]).get(job.id)


def resize_story(state: AppState, job: Job, rate: float | None) -> list[str] | None:
    """Why an elastic job has or has not been resized (:mod:`api.resize_view`); ``None`` for
    a job of fixed size (and no query is made for one)."""
    if not job.spec.is_elastic:
        return None
    now = time.time()
    active = state.store.active_jobs()
    totals = state.store.gpu_totals()
    alive = totals.alive if totals.recorded else state.settings.gpus
    cluster = ClusterNow.of(active, alive)
    waiting = [j for j in active if j.state.is_waiting and j.spec.workers <= alive]
    leader = state.store.leader_state()
    return resize_view.resize_story(
        job,
        policy=state.settings.policy,
        options=state.settings.policy_options,
        events=state.store.events(job.id),
        last_decisions=leader.last_decisions if leader is not None else [],
        free_gpus=cluster.free_gpus,
        waiting_jobs=len(waiting),
        rate=rate,
        now=now,
    )


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
