"""The model zoo as the API shows it: what each model is and which plan types fit here."""

from __future__ import annotations

from pydantic import Field

from api.schemas.common import Public


class PlanTypeFit(Public):
    kind: str = Field(examples=["pipeline"], description="data, pipeline or hybrid")
    describe: str = Field(examples=["pipeline[2bw] stages 1-2,3-4 x 1 replicas, 4 micro-batches"])
    fits: bool = Field(description="every worker fits the per-worker memory limit")
    chosen: bool = Field(description="what parallelism auto picks for this model here")
    max_worker_memory_bytes: int = Field(
        description="the most memory any worker needs for the model (what the limit covers)"
    )
    eta: float = Field(
        examples=[0.87],
        description="statistical efficiency: for data, the prior of an SPB staircase; for a "
        "2BW pipeline, the 2BW efficiency model at the JobSpec default learning_rate (what "
        "parallelism auto ranked it by here); 1 for GPipe and hybrid (no SPB)",
    )
    eta_source: str = Field(
        examples=["measured"],
        description="where eta comes from: measured, measured plan shape (lower bound), "
        "conservative default, full backprop, 2BW's one-step weight delay (the 2BW efficiency "
        "model), or no SPB",
    )


class ModelPublic(Public):
    name: str = Field(examples=["digits_cnn"])
    num_blocks: int = Field(examples=[4], description="K, the blocks SPB stop depths count")
    parameters: int = Field(description="trainable parameters (FP32)")
    profile: str = Field(
        examples=["measured"],
        description="where its cost profile comes from (measured or analytic default)",
    )
    plan_types: list[PlanTypeFit] = Field(
        description="every plan type predicted for the listed workers and batch; empty when "
        "none fits (see refusal)"
    )
    refusal: str | None = Field(
        default=None, description="why no plan type fits, naming each one's need"
    )


class ModelList(Public):
    workers: int = Field(description="the worker count the plan types were predicted for")
    batch_size: int = Field(description="the per-worker batch they were predicted for")
    gpu_type: str = Field(examples=["v100"])
    memory_limit_bytes: int = Field(
        description="the server's per-worker memory limit (JIGSAW_WORKER_MEMORY_GIB, else the "
        "GPU type's memory less its workspace)"
    )
    items: list[ModelPublic]
