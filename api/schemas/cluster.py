"""Cluster views: nodes, GPUs with the workers packed on them, utilization over time."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from api.schemas.common import Public, Timestamp


class NodePublic(Public):
    index: int
    name: str = Field(examples=["node-0"])
    num_gpus: int
    gpu_type: str = Field(examples=["v100"])
    gpu_memory_bytes: int
    alive: bool


class WorkerPublic(Public):
    job_id: str
    job_name: str
    rank: int
    depth: int | None = Field(
        description="the worker's SPB stop depth; null for a pipeline or hybrid plan"
    )
    role: str = Field(
        default="",
        examples=["depth 2", "stage 2/4", "shard 3/4"],
        description="what the worker does in its plan: its stop depth (data parallel), its "
        "stage (pipeline) or its shard (hybrid)",
    )
    predicted_load: float | None = Field(description="share of the GPU's time (oracle estimate)")
    memory_bytes: int | None = Field(description="predicted memory of this worker (oracle)")


class GpuPublic(Public):
    id: list[int] = Field(examples=[[0, 1]])
    node: int
    load: float = Field(
        description="sum of its workers' predicted loads: the GPU time they book. Over 1.0 "
        "the workers are time-sliced (take turns), each slower than alone"
    )
    memory_used_bytes: int
    memory_bytes: int
    workers: list[WorkerPublic]


class ClusterPublic(Public):
    nodes: list[NodePublic]
    gpus: list[GpuPublic]
    sharing: Literal["timeslice", "concurrent"] = Field(
        description="how workers that share a GPU run (JIGSAW_SHARING): timeslice, they take "
        "turns; concurrent, at once (as under MPS). A GPU whose load is over 1 is shared so"
    )


class NodeList(Public):
    items: list[NodePublic]


class GpuList(Public):
    items: list[GpuPublic]


class UtilizationSample(Public):
    at: Timestamp
    busy_gpus: int
    total_gpus: int
    utilization: float = Field(ge=0, le=1)


class UtilizationList(Public):
    items: list[UtilizationSample]
