"""Which plan type a job runs: data parallel (SPB or not), a pipeline, or a hybrid.

A pure function of the model profile, the hardware spec, the worker count, the per-worker
batch and a per-worker memory limit. It predicts every alternative with
:mod:`jigsaw.oracle.plan_predictions`, all at the job's global batch (workers x batch):

- ``data``: every worker holds the whole model.
- ``pipeline``: for every stage count S with 2 <= S <= K that divides the workers, N/S
  replicas of S stages, each replica taking S x batch samples in m micro-batches
  (m in S, 2S, 4S, 8S where it divides the replica batch); the split into stages is the
  fastest contiguous one whose every stage fits the memory limit (PipeDream-2BW's planner).
- ``hybrid``: the output-side run of blocks that hold linear layers is sharded column-wise
  across all workers (SplitBrain); the blocks before it stay data parallel.

Under ``auto`` it keeps data parallelism when it fits, unless a fitting alternative is
predicted to deliver more than ``1 + margin`` times its samples per second: the oracle's
iteration-time target is 15%, a smaller predicted gain is within its error, and a
data-parallel job keeps the SPB slack JigSaw packs other jobs into. A model that does not fit
one worker under data parallelism gets the fitting alternative with the best predicted
samples per second; when nothing fits, :class:`NoPlanFitsError` names the limit.
"""

from __future__ import annotations

from dataclasses import dataclass

from jigsaw.errors import InvalidSpecError
from jigsaw.hardware import HardwareSpec
from jigsaw.oracle.parallel_profile import ParallelProfile
from jigsaw.oracle.plan_partitions import partition_pipeline
from jigsaw.oracle.plan_predictions import (
    PlanPrediction,
    predict_data_parallel,
    predict_pipeline,
    predict_plan,
)
from jigsaw.parallelism import PARALLELISM_CHOICES, HybridPlan, PipelinePlan, PlanType
from jigsaw.profiles import ModelProfile
from jigsaw.sizes import human_bytes
from jigsaw.wording import counted

AUTO_MARGIN = 0.15
GIB = 1024**3


class NoPlanFitsError(InvalidSpecError):
    """No plan type the job allows fits the per-worker memory limit. The field is
    ``batch_size`` when a smaller batch would fit (the batch is what to fix), else
    ``parallelism``."""

    def __init__(self, message: str, field: str = "parallelism") -> None:
        super().__init__(message, field=field)


@dataclass(frozen=True, slots=True)
class Alternative:
    kind: PlanType
    plan: PipelinePlan | HybridPlan | None
    """``None`` for data parallelism (its SPB depths are the policy's choice)."""
    prediction: PlanPrediction
    fits: bool

    @property
    def samples_per_s(self) -> float:
        return self.prediction.samples_per_s

    def describe(self) -> str:
        return self.prediction.describe


@dataclass(frozen=True, slots=True)
class PlanChoice:
    requested: str
    chosen: Alternative
    alternatives: tuple[Alternative, ...]
    memory_limit_bytes: int
    reason: str


def data_alternative(
    profile: ModelProfile, hardware: HardwareSpec, workers: int, batch: int, limit: int
) -> Alternative:
    prediction = predict_data_parallel(profile, hardware, workers, batch)
    return Alternative("data", None, prediction, prediction.fits(limit))


def pipeline_alternatives(
    profile: ParallelProfile, hardware: HardwareSpec, workers: int, batch: int, limit: int
) -> list[Alternative]:
    """The best pipeline per stage count (fitting first, then fastest)."""
    found: list[Alternative] = []
    k = profile.blocks.num_blocks
    for stages in range(2, min(k, workers) + 1):
        if workers % stages:
            continue
        replicas = workers // stages
        replica_batch = batch * stages
        best: Alternative | None = None
        for m in (stages, 2 * stages, 4 * stages, 8 * stages):
            if replica_batch % m:
                continue
            plan = partition_pipeline(profile, hardware, stages, replicas, m, replica_batch, limit)
            fits = plan is not None
            if plan is None:  # nothing fits: show the fastest split, marked as not fitting
                plan = partition_pipeline(profile, hardware, stages, replicas, m, replica_batch)
            assert plan is not None
            candidate = Alternative(
                "pipeline", plan, predict_pipeline(profile, hardware, plan, replica_batch), fits
            )
            if best is None or _better(candidate, best):
                best = candidate
        if best is not None:
            found.append(best)
    return found


def hybrid_alternative(
    profile: ParallelProfile, hardware: HardwareSpec, workers: int, batch: int, limit: int
) -> Alternative | None:
    """The longest output-side run of blocks with linear layers, sharded column-wise, when
    the hybrid engine can build it."""
    plan = hybrid_suffix(profile, workers)
    if plan is None or hybrid_refusal(profile, plan) is not None:
        return None
    prediction = predict_plan(profile, hardware, plan, batch)
    return Alternative("hybrid", plan, prediction, prediction.fits(limit))


def hybrid_suffix(profile: ParallelProfile, workers: int) -> HybridPlan | None:
    """The hybrid plan's shape: the longest output-side run of blocks with linear layers,
    sharded column-wise; ``None`` below 2 workers or when the last block has no linear."""
    if workers < 2:
        return None
    counts = profile.linear_counts()
    first = len(counts) + 1
    while first > 1 and counts[first - 2] > 0:
        first -= 1
    if first > len(counts):
        return None
    return HybridPlan.suffix(len(counts), workers, first, "column")


def hybrid_refusal(profile: ParallelProfile, plan: HybridPlan) -> str | None:
    """Why the hybrid engine could not build ``plan`` for this model (a sharded layer too
    narrow for the workers), from the profile's linear layers; ``None`` when it can."""
    try:
        plan.check_shardable(
            [
                (layer.block, layer.in_features, layer.out_features)
                for layer in profile.linear_layers
            ]
        )
    except InvalidSpecError as error:
        return str(error)
    return None


def alternatives(
    profile: ModelProfile,
    parallel: ParallelProfile | None,
    hardware: HardwareSpec,
    workers: int,
    batch: int,
    limit: int,
) -> tuple[Alternative, ...]:
    """Every alternative: data first, then pipelines by stage count, then hybrid."""
    found = [data_alternative(profile, hardware, workers, batch, limit)]
    if parallel is not None:
        found.extend(pipeline_alternatives(parallel, hardware, workers, batch, limit))
        hybrid = hybrid_alternative(parallel, hardware, workers, batch, limit)
        if hybrid is not None:
            found.append(hybrid)
    return tuple(found)


def choose_plan(
    profile: ModelProfile,
    parallel: ParallelProfile | None,
    hardware: HardwareSpec,
    workers: int,
    batch: int,
    memory_limit_bytes: int,
    parallelism: str = "auto",
    margin: float = AUTO_MARGIN,
) -> PlanChoice:
    """The plan type a job of ``workers`` x ``batch`` runs under ``parallelism``.

    ``parallel`` is ``None`` when the profile lacks block output sizes: data only.
    Raises :class:`InvalidSpecError` on ``parallelism`` when the requested type cannot be
    predicted or built for this model, :class:`NoPlanFitsError` when nothing allowed fits.
    """
    if parallelism not in PARALLELISM_CHOICES:
        raise InvalidSpecError(
            f"parallelism must be one of {', '.join(PARALLELISM_CHOICES)}, got {parallelism!r}",
            field="parallelism",
        )
    if parallelism in ("pipeline", "hybrid") and parallel is None:
        raise InvalidSpecError(
            f"parallelism {parallelism!r} needs a model profile with block output sizes; "
            f"model {profile.model!r} has none: use parallelism data",
            field="parallelism",
        )
    every = alternatives(profile, parallel, hardware, workers, batch, memory_limit_bytes)
    allowed = [a for a in every if parallelism == "auto" or a.kind == parallelism]
    if not allowed:
        raise InvalidSpecError(
            f"parallelism {parallelism!r} has no plan for model {profile.model!r} on "
            f"{workers} worker(s): {_why_none(parallelism, parallel, workers)}",
            field="parallelism",
        )
    fitting = [a for a in allowed if a.fits]
    if not fitting:
        smaller = batch > 1 and _fits_at_batch_one(
            profile, parallel, hardware, workers, memory_limit_bytes, parallelism
        )
        raise NoPlanFitsError(
            _nothing_fits(allowed, memory_limit_bytes, parallelism, batch if smaller else None),
            field="batch_size" if smaller else "parallelism",
        )
    best = max(fitting, key=lambda a: a.samples_per_s)
    data = every[0]
    if parallelism == "auto" and data.fits:
        if best.samples_per_s > (1.0 + margin) * data.samples_per_s:
            reason = (
                f"{best.kind} is predicted {best.samples_per_s / data.samples_per_s:.2f}x "
                f"the samples/s of data parallelism (over the {margin:.0%} margin)"
            )
        else:
            best = data
            reason = "data parallelism fits; no alternative is predicted over "
            reason += f"{1 + margin:.2f}x its samples/s"
    elif parallelism == "auto":
        reason = (
            f"data parallelism needs {human_bytes(data.prediction.max_model_bytes)} per worker, "
            f"over the {human_bytes(memory_limit_bytes)} limit; {best.kind} fits and is the "
            "fastest that does"
        )
    else:
        reason = f"parallelism {parallelism} requested"
    return PlanChoice(parallelism, best, every, memory_limit_bytes, reason)


def _better(a: Alternative, b: Alternative) -> bool:
    if a.fits != b.fits:
        return a.fits
    if a.fits:
        return a.samples_per_s > b.samples_per_s
    return a.prediction.max_model_bytes < b.prediction.max_model_bytes


def _why_none(parallelism: str, parallel: ParallelProfile | None, workers: int) -> str:
    blocks = parallel.blocks.num_blocks if parallel is not None else 0
    if parallelism == "pipeline":
        return (
            f"a pipeline needs a stage count of 2..{blocks} (the model's blocks) that divides "
            f"{counted(workers, 'worker')}"
        )
    plan = hybrid_suffix(parallel, workers) if parallel is not None else None
    refusal = hybrid_refusal(parallel, plan) if parallel is not None and plan else None
    if refusal is not None:
        return (
            "a hybrid shards the output-side linear layers across every worker, and "
            f"{refusal}: ask for fewer workers"
        )
    return "a hybrid needs at least 2 workers and linear layers in the model's last block"


def _fits_at_batch_one(
    profile: ModelProfile,
    parallel: ParallelProfile | None,
    hardware: HardwareSpec,
    workers: int,
    limit: int,
    parallelism: str,
) -> bool:
    """Whether an allowed plan type fits at one sample per worker: then the batch is what
    makes the job too big, not the model."""
    every = alternatives(profile, parallel, hardware, workers, 1, limit)
    return any(a.fits for a in every if parallelism == "auto" or a.kind == parallelism)


def _nothing_fits(
    allowed: list[Alternative], limit: int, parallelism: str, batch: int | None
) -> str:
    needs = "; ".join(
        f"{a.describe()} needs {human_bytes(a.prediction.max_model_bytes)}" for a in allowed
    )
    subject = (
        "no plan type fits" if parallelism == "auto" else f"parallelism {parallelism} does not fit"
    )
    advice = "Use more workers, a smaller batch_size, or a larger limit"
    if batch is not None:
        subject = f"at batch_size {batch} {subject}"
        advice = (
            "Use a smaller batch_size (one sample per worker fits), more workers, or a larger limit"
        )
    return (
        f"{subject} the per-worker memory limit of {human_bytes(limit)} "
        f"(JIGSAW_WORKER_MEMORY_GIB): {needs}. {advice}"
    )
