"""Job bodies: what a user submits and what the API shows."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, ConfigDict, Field

from api.schemas.common import Forbidding, Integer, NonBlankText, Public, Text, Timestamp, integral
from api.schemas.scheduler import QueueEntry
from jigsaw.model.plan import PLAN_TEXT_PATTERN
from jigsaw.model.profiles import ZOO_MODELS
from jigsaw.model.spec_checks import MAX_ITERATIONS, MAX_WORKERS, NAME_MAX_LENGTH
from jigsaw.planning.catalog import ENTRYPOINT

JOB_EXAMPLE: dict[str, Any] = {
    "name": "digits-demo",
    "model": "digits_cnn",
    "workers": 4,
    "iterations": 300,
    "priority": 0,
    "spb": "staircase",
    "batch_size": 32,
    "learning_rate": 0.05,
    "seed": 0,
    "queue": "default",
}


ENTRYPOINT_PATTERN = f"^{ENTRYPOINT.pattern}$"
"""jigsaw.planning.catalog's entrypoint syntax, anchored (a JSON Schema pattern matches
anywhere)."""

Depth = Annotated[int, Field(ge=0, le=1_000_000)]


# Optional integers whose bounds the JSON schema states as minimum/maximum: the validator
# sits on the union (on the integer, pydantic would print the bounds as ge/le).
OptionalWorkers = Annotated[
    Annotated[int, Field(ge=1, le=MAX_WORKERS)] | None, BeforeValidator(integral)
]
OptionalBatch = Annotated[
    Annotated[int, Field(ge=1, le=2**31 - 1)] | None, BeforeValidator(integral)
]


def integral_items(value: Any) -> Any:
    """``[0, 1.0]`` is ``[0, 1]`` (on the list: a validator on the item would make pydantic
    print its bounds as ``ge``/``le`` in the JSON schema instead of minimum/maximum)."""
    return [integral(item) for item in value] if isinstance(value, list) else value


class JobCreate(Forbidding):
    """A job spec. The user comes from the token, never from the body."""

    model_config = ConfigDict(
        extra="forbid", strict=True, json_schema_extra={"examples": [JOB_EXAMPLE]}
    )

    name: NonBlankText = Field(min_length=1, max_length=NAME_MAX_LENGTH)
    model: Text = Field(
        min_length=1,
        max_length=200,
        description="a zoo model, or an entrypoint package.module:function",
        json_schema_extra={"anyOf": [{"enum": list(ZOO_MODELS)}, {"pattern": ENTRYPOINT_PATTERN}]},
    )
    workers: Integer = Field(ge=1, le=MAX_WORKERS)
    iterations: Integer = Field(ge=1, le=MAX_ITERATIONS)
    priority: Integer = Field(default=0, ge=-1000, le=1000)
    spb: (
        Annotated[Text, Field(max_length=8192, json_schema_extra={"pattern": PLAN_TEXT_PATTERN})]
        | Annotated[
            list[Depth],
            BeforeValidator(integral_items),
            Field(
                min_length=1,
                max_length=MAX_WORKERS,
                json_schema_extra={"contains": {"const": 0}},  # block 1 must be trained
            ),
        ]
    ) = Field(
        default="auto",
        description="none | staircase | uniform:k | auto | depths such as 0,1,2,3",
    )
    batch_size: Integer = Field(default=32, ge=1, le=2**31 - 1)
    learning_rate: float = Field(default=0.05, gt=0, le=1e6, allow_inf_nan=False)
    seed: Integer = Field(default=0, ge=0, le=2**53)
    queue: Text = Field(default="default", min_length=1, max_length=128)
    parallelism: Literal["auto", "data", "pipeline", "hybrid"] | None = Field(
        default=None,
        description="the plan type: auto (the oracle picks the fastest type that fits the "
        "per-worker memory limit; the default for zoo models), data (data parallel, with SPB "
        "per spb; the default for entrypoints), pipeline (PipeDream-2BW stages) or hybrid "
        "(SplitBrain: linear layers sharded). spb applies only to data parallelism",
    )
    min_workers: OptionalWorkers = Field(
        default=None,
        description="elastic jobs: the fewest workers a policy may run the job on (default: "
        "workers). workers stays the initial size and must lie in min_workers..max_workers",
    )
    max_workers: OptionalWorkers = Field(
        default=None,
        description="elastic jobs: the most workers a policy may give the job (default: "
        "workers); at most the cluster's GPUs and the queue's quota",
    )
    batch_policy: Literal["fixed", "adaptive"] = Field(
        default="fixed",
        description="fixed: the global batch workers * batch_size is kept at every size (each "
        "size in min_workers..max_workers must divide it; a resize changes speed, never "
        "statistics); adaptive: a policy may choose the global batch within "
        "min_global_batch..max_global_batch, which must hold the initial one. Data-parallel "
        "jobs only",
    )
    min_global_batch: OptionalBatch = Field(default=None, description="batch_policy adaptive only")
    max_global_batch: OptionalBatch = Field(default=None, description="batch_policy adaptive only")
    optimizer: Literal["sgd", "adamw"] = Field(
        default="sgd",
        description="sgd (momentum 0.9) or adamw (torch's AdamW, betas 0.9 and 0.999; it has no "
        "momentum to set). Under batch_policy adaptive it picks the learning-rate rule: "
        "AdaScale for sgd, the square-root rule for adamw. adamw runs data parallel only "
        "(parallelism auto then means data) and its state, two moments per parameter, counts "
        "against the per-worker memory limit",
    )


class AlternativePublic(Public):
    kind: str = Field(examples=["pipeline"], description="data, pipeline or hybrid")
    describe: str = Field(examples=["pipeline[2bw] stages 1-4,5-6 x 1 replicas, 4 micro-batches"])
    plan: dict[str, Any] | None = Field(
        description="the plan as the store keeps it (null for data: the policy picks its SPB "
        "depths)"
    )
    iteration_time_s: float
    samples_per_s: float
    max_worker_memory_bytes: int = Field(
        description="the most memory any worker needs for the model (parameters, gradients, "
        "optimizer state, activations; the runtime workspace excluded): what the limit covers"
    )
    max_worker_bytes_sent: int = Field(description="bytes the busiest sender sends per iteration")
    fits: bool = Field(description="every worker fits the per-worker memory limit")
    chosen: bool


class PlanTypesPublic(Public):
    parallelism: str = Field(description="what the spec asked for")
    chosen: str = Field(examples=["data"])
    reason: str
    memory_limit_bytes: int = Field(
        description="the per-worker limit on the model's memory (JIGSAW_WORKER_MEMORY_GIB, else "
        "the GPU type's memory less its workspace)"
    )
    alternatives: list[AlternativePublic]


class EtaEstimatePublic(Public):
    plan: str = Field(examples=["staircase"], description="none, staircase, uniform:k, or depths")
    depths: list[int] = Field(
        examples=[[0, 1, 2, 3]], description="SPB stop depths; [] for a pipeline or hybrid plan"
    )
    eta: float = Field(examples=[0.93], description="progress per iteration vs full backprop")
    source: str = Field(
        examples=["online"],
        description="online (this job's gradient noise), full backprop, measured table or "
        "default (the prior, until every block is measured); for a 2BW pipeline, the 2BW "
        "efficiency model of its one-step weight delay at the job's learning_rate (what "
        "parallelism auto ranked it by); for a GPipe pipeline or a hybrid, no SPB (eta 1)",
    )


class EtaPublic(Public):
    current: EtaEstimatePublic | None = Field(
        description="eta of the plan the job runs (null before it has one)"
    )
    candidates: list[EtaEstimatePublic] = Field(
        description="eta of every plan an spb=auto job may be given; empty while K is unknown; "
        "before a pipeline or hybrid job starts, the one plan the planner gives it"
    )
    blocks_measured: int = Field(examples=[4])
    fewest_observations: int = Field(
        examples=[12], description="smoothed observations of the least-measured block"
    )
    needed_observations: int = Field(
        examples=[10], description="observations every block needs before eta is online"
    )


class JobPublic(Public):
    id: str = Field(examples=["j-3f2a9c01b7de"])
    name: str
    user: str
    queue: str
    state: str = Field(examples=["RUNNING"])
    priority: int
    spec: dict[str, Any] = Field(examples=[{**JOB_EXAMPLE, "user": "alice"}])
    iterations: int
    iterations_done: float
    progress: float = Field(ge=0, le=1, description="iterations_done / iterations")
    plan: list[int] = Field(
        examples=[[0, 1, 2, 3]],
        description="Stop depth per worker of the current (or last) run; [] before a start",
    )
    plan_kind: str | None = Field(
        default=None, examples=["spb"], description="The plan's type; null before a start"
    )
    plan_detail: dict[str, Any] | None = Field(
        default=None,
        description="The current (or last) plan as stored: kind spb (depths), pipeline "
        "(stages, micro_batches, replicas, schedule) or hybrid (sharded blocks); null before "
        "a start",
    )
    plan_types: PlanTypesPublic | None = Field(
        default=None,
        description="The oracle's prediction for every plan type and the one chosen (one "
        "job's view only; null for a model without a profile)",
    )
    num_blocks: int | None = Field(
        default=None,
        examples=[4],
        description="The model's block count K the plan was resolved for (or the one the "
        "workers reported); null while unknown",
    )
    eta: EtaPublic | None = Field(
        default=None,
        description="Statistical efficiency, measured online from the job's gradient noise",
    )
    placement: list[list[int]] = Field(examples=[[[0, 0], [0, 1], [0, 2], [0, 3]]])
    current_workers: int | None = Field(
        default=None,
        examples=[4],
        description="Workers of the current (or last) run; an elastic job's size changes at "
        "resizes (events with code Running/Resized say why). null while it holds no GPUs",
    )
    worker_batch: int = Field(
        examples=[32],
        description="Samples each worker takes per iteration now (the spec's batch_size until "
        "a policy resized the job)",
    )
    global_batch: int = Field(
        examples=[128], description="worker_batch x current_workers (x workers before a start)"
    )
    attempt: int
    preemptions: int
    failures: int
    reason: str
    version: int
    created_at: Timestamp
    started_at: Timestamp
    finished_at: Timestamp
    last_loss: float | None
    preempted_by: str | None
    waiting: QueueEntry | None = Field(
        default=None,
        description="A waiting job's place in the queue, estimated start and why it waits, "
        "as GET /scheduler/queue gives them; null once it runs or finished",
    )
    iterations_per_s: float | None = Field(
        default=None,
        examples=[9.8],
        description="A running job's observed rate (its workers' recent reports); null "
        "before it reported",
    )
    remaining_s: float | None = Field(
        default=None,
        examples=[42.0],
        description="A running job's iterations left at iterations_per_s (an estimate)",
    )
    resizing: list[str] | None = Field(
        default=None,
        examples=[["the policy fifo does not resize jobs"]],
        description="An elastic job (one job's view only): why it has, or has not, been "
        "resized, in phrases; null for a job of fixed size",
    )


class JobList(Public):
    items: list[JobPublic]
    total: int
    limit: int
    offset: int


class JobEventPublic(Public):
    from_state: str | None = Field(examples=["PENDING"])
    to_state: str = Field(examples=["ADMITTED"])
    reason: str = Field(examples=["fifo: head fits"])
    at: Timestamp
    actor: str = Field(examples=["scheduler"])
    code: str = Field(
        default="",
        examples=["Preempted/OutrankedBy"],
        description="Machine-readable Type/Reason; empty for events recorded before codes",
    )


class JobEventList(Public):
    items: list[JobEventPublic]


class ProgressSamplePublic(Public):
    iteration: float
    at: Timestamp
    loss: float | None
    throughput: float | None = Field(description="samples per second over the last interval")
    plan: list[int]
    metrics: dict[str, Any]


class ProgressList(Public):
    items: list[ProgressSamplePublic]


class LogLinePublic(Public):
    seq: int
    at: Timestamp
    line: str


class LogList(Public):
    items: list[LogLinePublic]
    next: int = Field(description="pass as ?after= to get only newer lines")


class PredictionPublic(Public):
    iteration_time_s: float | None
    per_worker_memory_bytes: list[int]
    per_worker_compute_s: list[float]
    per_worker_bytes_sent: list[int]
    source: str = Field(description="where the numbers come from (oracle profile or a fallback)")


class JobValidation(Public):
    spec: dict[str, Any]
    plan: list[int] = Field(description="stop depths of a data-parallel plan; [] otherwise")
    plan_kind: str = Field(examples=["spb"], description="spb, pipeline or hybrid")
    plan_detail: dict[str, Any] = Field(description="the plan as the store keeps it")
    plan_types: PlanTypesPublic | None = Field(
        default=None, description="every plan type predicted; null without a profile"
    )
    num_blocks: int | None = Field(
        description="The model's block count K; null for an entrypoint model until its "
        "first lease reports it (the plan shown is then full backprop)"
    )
    prediction: PredictionPublic
