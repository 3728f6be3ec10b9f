"""Domain objects to response schemas (the one place that decides how a job looks)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from api.oracle_view import OracleView
from api.schemas.jobs import (
    AlternativePublic,
    EtaEstimatePublic,
    EtaPublic,
    JobEventPublic,
    JobPublic,
    PlanTypesPublic,
    ProgressSamplePublic,
)
from api.schemas.scheduler import QueueEntry
from api.timefmt import iso
from jigsaw.efficiency.online import candidate_etas, job_eta, noise_summary, table_prior
from jigsaw.efficiency.pipeline import ENGINE_MOMENTUM
from jigsaw.efficiency.table import EtaEstimate
from jigsaw.model.domain import Job, JobEvent, JobSpec
from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.parallelism import HybridPlan, PipelinePlan
from jigsaw.model.plan import SPBPlan, plan_to_json
from jigsaw.oracle.plan_choice import PlanChoice, plan_efficiency, updates_one_step_late
from jigsaw.planning.planner import Planner

NO_SPB = "no SPB: every block's gradient averages the whole batch"


def typed_plan_eta(
    plan: PipelinePlan | HybridPlan | None, model: str, lr: float
) -> tuple[float, str]:
    """η of a pipeline or hybrid plan and where it comes from: 2BW's one-step weight delay
    priced by :func:`~jigsaw.oracle.plan_choice.plan_efficiency` at the job's learning rate
    and the engines' momentum (what ``parallelism: auto`` ranked it by), else 1 (GPipe and
    the hybrid are exact synchronous SGD). The source reads up to its colon as a short label
    (the dashboard shows that part)."""
    if not updates_one_step_late(plan):
        return 1.0, NO_SPB
    eta = plan_efficiency(plan, model, lr, ENGINE_MOMENTUM)
    source = (
        f"2BW's one-step weight delay: the 2BW efficiency model at lr {lr:g}, "
        f"momentum {ENGINE_MOMENTUM:g}; no SPB"
    )
    return eta, source


def eta_public(job: Job, oracle: OracleView) -> EtaPublic:
    """The job's eta, online from its gradient noise, for its plan and every candidate. A
    pipeline or hybrid plan has no SPB: its eta is its plan type's (:func:`typed_plan_eta`),
    ``current`` once it runs one, its one candidate before (the plan the planner gives it)."""
    typed = job.plan if job.plan is not None else oracle.planner.typed_plan(job.spec)
    if typed is not None and not isinstance(typed, SPBPlan):
        eta, source = typed_plan_eta(typed, job.spec.model, job.spec.learning_rate)
        whole = EtaEstimatePublic(plan=typed.describe(), depths=[], eta=eta, source=source)
        if job.plan is None:
            return EtaPublic(current=None, candidates=[whole], **noise_summary(job))
        return EtaPublic(current=whole, candidates=[], **noise_summary(job))
    prior = table_prior(oracle.oracle.efficiency)(job)
    blocks = oracle.planner.num_blocks(job)
    if job.plan is not None and job.plan.num_blocks > 1:
        blocks = job.plan.num_blocks

    def view(label: str, plan: SPBPlan, estimate: EtaEstimate) -> EtaEstimatePublic:
        return EtaEstimatePublic(
            plan=label, depths=list(plan.depths), eta=estimate.eta, source=estimate.source
        )

    current = None
    if isinstance(job.plan, SPBPlan) and (blocks is None or job.plan.num_blocks == blocks):
        current = view(job.plan.describe(), job.plan, job_eta(job, job.plan, prior))
    candidates = (
        [view(c.label, c.plan, c.estimate) for c in candidate_etas(job, blocks, prior)]
        if blocks is not None
        else []
    )
    return EtaPublic(current=current, candidates=candidates, **noise_summary(job))


def plan_types_public(spec: JobSpec, planner: Planner) -> PlanTypesPublic | None:
    """The oracle's prediction for every plan type of ``spec`` and the one chosen; ``None``
    for a model without a profile, or one whose choice failed (refused at submit)."""
    try:
        choice = planner.plan_choice(spec)
    except InvalidSpecError:
        return None
    return plan_choice_public(choice) if choice is not None else None


def plan_choice_public(choice: PlanChoice) -> PlanTypesPublic:
    return PlanTypesPublic(
        parallelism=choice.requested,
        chosen=choice.chosen.kind,
        reason=choice.reason,
        memory_limit_bytes=choice.memory_limit_bytes,
        alternatives=[
            AlternativePublic(
                kind=a.kind,
                describe=a.describe(),
                plan=plan_to_json(a.plan) if a.plan is not None else None,
                iteration_time_s=a.prediction.iteration_time_s,
                samples_per_s=a.samples_per_s,
                max_worker_memory_bytes=a.prediction.max_model_bytes,
                max_worker_bytes_sent=max(a.prediction.per_worker_bytes_sent),
                fits=a.fits,
                chosen=a is choice.chosen,
            )
            for a in choice.alternatives
        ],
    )


def job_public(
    job: Job,
    last_loss: float | None = None,
    eta: EtaPublic | None = None,
    plan_types: PlanTypesPublic | None = None,
    *,
    waiting: QueueEntry | None = None,
    rate: float | None = None,
    resizing: list[str] | None = None,
) -> JobPublic:
    """``waiting``: the job's queue entry (:mod:`api.queue_view`); ``rate``: its observed
    iterations per second while it runs; ``resizing``: an elastic job's resize story
    (:mod:`api.resize_view`)."""
    spec = job.spec
    running = job.state.holds_resources and rate is not None and rate > 0
    return JobPublic(
        id=job.id,
        name=spec.name,
        user=spec.user,
        queue=spec.queue,
        state=job.state.value,
        priority=spec.priority,
        spec=spec.to_dict(),
        iterations=spec.iterations,
        iterations_done=job.iterations_done,
        progress=min(max(job.iterations_done / spec.iterations, 0.0), 1.0),
        plan=list(job.plan.depths) if isinstance(job.plan, SPBPlan) else [],
        plan_kind=job.plan.kind if job.plan is not None else None,
        plan_detail=plan_to_json(job.plan) if job.plan is not None else None,
        plan_types=plan_types,
        num_blocks=job.plan.num_blocks if job.plan is not None else job.model_blocks,
        placement=[list(gpu) for gpu in job.placement],
        current_workers=len(job.placement) if job.placement else None,
        worker_batch=job.current_worker_batch,
        global_batch=job.current_worker_batch * (len(job.placement) or spec.workers),
        attempt=job.attempt,
        preemptions=job.preemptions,
        failures=job.failures,
        reason=job.reason,
        version=job.version,
        created_at=iso(job.submitted_at),
        started_at=iso(job.started_at),
        finished_at=iso(job.finished_at),
        last_loss=last_loss,
        preempted_by=job.preempted_by,
        eta=eta,
        waiting=waiting if job.state.is_waiting else None,
        iterations_per_s=rate if running else None,
        remaining_s=job.remaining_iterations / rate if running and rate else None,
        resizing=resizing,
    )


def job_json(
    job: Job,
    last_loss: float | None = None,
    eta: EtaPublic | None = None,
    plan_types: PlanTypesPublic | None = None,
) -> bytes:
    return job_public(job, last_loss, eta, plan_types).model_dump_json().encode()


def event_public(event: JobEvent) -> JobEventPublic:
    return JobEventPublic(
        from_state=event.from_state.value if event.from_state is not None else None,
        to_state=event.to_state.value,
        reason=event.reason,
        at=iso(event.at),
        actor=event.actor,
        code=str(event.code),
    )


def sample_public(row: Mapping[str, Any]) -> ProgressSamplePublic:
    return ProgressSamplePublic(
        iteration=row["iteration"],
        at=iso(row["at"]),
        loss=row["loss"],
        throughput=row["throughput"],
        plan=list(row["plan"]),
        metrics=dict(row["metrics"] or {}),
    )
