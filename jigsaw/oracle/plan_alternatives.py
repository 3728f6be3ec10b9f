"""Every plan type a job could run, predicted: data parallel, pipelines and the hybrid.

Each alternative is predicted with :mod:`jigsaw.oracle.plan_predictions` at the job's global
batch (workers x batch) and marked as fitting the per-worker memory limit or not:

- ``data``: every worker holds the whole model.
- ``pipeline``: for every stage count S with 2 <= S <= K that divides the workers, N/S
  replicas of S stages, each replica taking S x batch samples in m micro-batches
  (m in S, 2S, 4S, 8S where it divides the replica batch); the split into stages is the
  fastest contiguous one whose every stage fits the memory limit (PipeDream-2BW's planner).
- ``hybrid``: the output-side run of blocks that hold linear layers is sharded column-wise
  across all workers (SplitBrain); the blocks before it stay data parallel.

Which one a job runs is :mod:`jigsaw.oracle.plan_choice`'s business.
"""

from __future__ import annotations

from dataclasses import dataclass

from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.hardware import HardwareSpec
from jigsaw.model.parallelism import HybridPlan, PipelinePlan, PlanType
from jigsaw.model.profiles import ModelProfile
from jigsaw.oracle.parallel_profile import ParallelProfile
from jigsaw.oracle.plan_partitions import partition_pipeline
from jigsaw.oracle.plan_predictions import (
    PlanPrediction,
    predict_data_parallel,
    predict_pipeline,
    predict_plan,
)


@dataclass(frozen=True, slots=True)
class Alternative:
    kind: PlanType
    plan: PipelinePlan | HybridPlan | None
    """``None`` for data parallelism (its SPB depths are the policy's choice)."""
    prediction: PlanPrediction
    fits: bool
    efficiency: float = 1.0
    """η: progress per sample against exact synchronous SGD (below 1 only for 2BW)."""

    @property
    def samples_per_s(self) -> float:
        return self.prediction.samples_per_s

    @property
    def goodput(self) -> float:
        """Predicted samples/s x η: samples/s at data parallelism's progress per sample."""
        return self.prediction.samples_per_s * self.efficiency

    def describe(self) -> str:
        return self.prediction.describe


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


def _better(a: Alternative, b: Alternative) -> bool:
    """Between two pipelines of one stage count (the same η): fitting, then faster."""
    if a.fits != b.fits:
        return a.fits
    if a.fits:
        return a.samples_per_s > b.samples_per_s
    return a.prediction.max_model_bytes < b.prediction.max_model_bytes
