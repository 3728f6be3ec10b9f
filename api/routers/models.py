"""/api/v1/models: the model zoo, with which plan types fit this server's memory limit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Depends, Query

from api.deps import Reader, StateDep, reject_unknown_query
from api.json_body import JsonRoute
from api.presenters import typed_plan_eta
from api.schemas.common import COMMON_ERRORS
from api.schemas.models import ModelList, ModelPublic, PlanTypeFit
from api.state import AppState
from jigsaw.model.domain import JobSpec
from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.plan import staircase
from jigsaw.model.profiles import ZOO_MODELS
from jigsaw.model.spec_checks import MAX_WORKERS
from jigsaw.oracle.plan_alternatives import Alternative
from jigsaw.oracle.plan_choice import PlanChoice

router = APIRouter(
    route_class=JsonRoute,
    prefix="/api/v1",
    tags=["models"],
    responses=COMMON_ERRORS,
    dependencies=[Depends(reject_unknown_query)],
)

FP32_BYTES = 4


@dataclass(frozen=True, slots=True)
class PlanTypes:
    """The plan-type choice for one spec, or why no plan type fits."""

    choice: PlanChoice | None
    refusal: str | None


# The app's planner is asked in these two functions only (the submission checks ask the same
# one), so that another planner changes this view with them.


def plan_types_for(state: AppState, spec: JobSpec) -> PlanTypes:
    try:
        return PlanTypes(state.planner.plan_choice(spec), None)
    except InvalidSpecError as error:
        return PlanTypes(None, str(error))


def memory_limit_bytes(state: AppState) -> int:
    """The per-worker memory limit every plan type must fit."""
    return state.planner.memory_limit_bytes


@router.get("/models", response_model=ModelList, operation_id="list_models")
def list_models(
    _principal: Reader,
    state: StateDep,
    workers: Annotated[
        int, Query(ge=1, le=MAX_WORKERS, description="predict the plan types for this gang")
    ] = 4,
    batch_size: Annotated[int, Query(ge=1, le=2**31 - 1, description="per-worker batch")] = 32,
) -> ModelList:
    """Every zoo model: K, parameters, and which plan types fit the per-worker memory limit
    at ``workers`` x ``batch_size``, with the source of each plan type's eta."""
    items: list[ModelPublic] = []
    for name in ZOO_MODELS:
        entry = state.planner.catalog.find(name)
        if entry is None or entry.profile is None:
            continue
        spec = JobSpec(
            name="models", model=name, workers=workers, iterations=1, batch_size=batch_size
        )
        types = plan_types_for(state, spec)
        items.append(
            ModelPublic(
                name=name,
                num_blocks=entry.profile.num_blocks,
                parameters=entry.profile.param_bytes // FP32_BYTES,
                profile=entry.profile.source,
                plan_types=[
                    _fit(state, spec, entry.profile.num_blocks, a, types.choice)
                    for a in (types.choice.alternatives if types.choice else ())
                ],
                refusal=types.refusal,
            )
        )
    return ModelList(
        workers=workers,
        batch_size=batch_size,
        gpu_type=state.settings.gpu_type,
        memory_limit_bytes=memory_limit_bytes(state),
        items=items,
    )


def _fit(
    state: AppState,
    spec: JobSpec,
    num_blocks: int,
    alternative: Alternative,
    choice: PlanChoice | None,
) -> PlanTypeFit:
    if alternative.kind == "data":
        plan = staircase(spec.workers, num_blocks)
        prior = state.oracle.oracle.efficiency.lookup(spec.model, plan)
        eta, source = prior.eta, prior.source
    else:  # at the job default learning rate, which the listing's choice was ranked at
        eta, source = typed_plan_eta(alternative.plan, spec.model, spec.learning_rate)
    return PlanTypeFit(
        kind=alternative.kind,
        describe=alternative.describe(),
        fits=alternative.fits,
        chosen=choice is not None and alternative is choice.chosen,
        max_worker_memory_bytes=alternative.prediction.max_model_bytes,
        eta=eta,
        eta_source=source,
    )
