"""/api/v1/cluster: nodes, GPUs, packing and utilization."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Depends, Query

from api.cluster_view import list_gpus, list_nodes
from api.deps import Reader, StateDep, reject_unknown_query
from api.json_body import JsonRoute
from api.privacy import privacy_mask
from api.routers.time_params import parse_since
from api.schemas.cluster import (
    ClusterPublic,
    GpuList,
    NodeList,
    UtilizationList,
    UtilizationSample,
)
from api.schemas.common import COMMON_ERRORS
from api.timefmt import iso

router = APIRouter(
    route_class=JsonRoute,
    prefix="/api/v1",
    tags=["cluster"],
    responses=COMMON_ERRORS,
    dependencies=[Depends(reject_unknown_query)],
)

DEFAULT_WINDOW_S = 3600.0
MAX_SAMPLES = 2000


@router.get("/cluster", response_model=ClusterPublic, operation_id="get_cluster")
def get_cluster(principal: Reader, state: StateDep) -> ClusterPublic:
    """Nodes, and every GPU with the workers packed on it (predicted load and memory)."""
    node_list = list_nodes(state.engine)
    mask = privacy_mask(state, principal)
    return ClusterPublic(
        nodes=node_list,
        gpus=list_gpus(state.engine, state.oracle, node_list, mask),
        sharing=state.settings.sharing,
    )


@router.get("/cluster/nodes", response_model=NodeList, operation_id="list_nodes")
def get_nodes(_principal: Reader, state: StateDep) -> NodeList:
    return NodeList(items=list_nodes(state.engine))


@router.get("/cluster/gpus", response_model=GpuList, operation_id="list_gpus")
def get_gpus(principal: Reader, state: StateDep) -> GpuList:
    mask = privacy_mask(state, principal)
    return GpuList(items=list_gpus(state.engine, state.oracle, list_nodes(state.engine), mask))


@router.get("/cluster/packing", response_model=GpuList, operation_id="get_packing")
def get_packing(principal: Reader, state: StateDep) -> GpuList:
    """Only GPUs shared by workers of more than one job."""
    mask = privacy_mask(state, principal)
    gpus = list_gpus(state.engine, state.oracle, list_nodes(state.engine), mask)
    return GpuList(items=[gpu for gpu in gpus if len({w.job_id for w in gpu.workers}) > 1])


@router.get(
    "/cluster/utilization",
    response_model=UtilizationList,
    operation_id="get_utilization",
)
def get_utilization(
    _principal: Reader,
    state: StateDep,
    since: Annotated[
        str | None,
        Query(
            max_length=64,
            description="ISO-8601 time; default: the last hour",
            json_schema_extra={"format": "date-time"},
        ),
    ] = None,
) -> UtilizationList:
    """Busy and total GPUs over time, as the scheduler sampled them (at most 2000 points)."""
    start = time.time() - DEFAULT_WINDOW_S if since is None else parse_since(since)
    points = state.store.utilization_since(start)
    step = max(1, -(-len(points) // MAX_SAMPLES))
    return UtilizationList(
        items=[
            UtilizationSample(
                at=iso(point.at),
                busy_gpus=point.busy_gpus,
                total_gpus=point.total_gpus,
                utilization=point.busy_gpus / point.total_gpus if point.total_gpus else 0.0,
            )
            for point in points[::step]
        ]
    )
