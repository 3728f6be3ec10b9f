"""Choose a pipeline's stages: contiguous splits of the model's blocks, searched exhaustively
(K is a handful of blocks), scored by :mod:`jigsaw.oracle.plan_predictions`."""

from __future__ import annotations

from itertools import combinations
from typing import Literal

from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.hardware import HardwareSpec
from jigsaw.model.parallelism import PipelinePlan
from jigsaw.model.profiles import ModelProfile
from jigsaw.oracle.parallel_profile import ParallelProfile
from jigsaw.oracle.plan_predictions import BlockSeconds, predict_pipeline


def balanced_stages(
    profile: ModelProfile, hardware: HardwareSpec, num_stages: int
) -> tuple[tuple[int, int], ...]:
    """Contiguous stages minimising the slowest stage's per-sample compute (ties: fewer
    parameters on the heaviest stage). Exhaustive: K is a handful of blocks."""
    k = profile.num_blocks
    if not 1 <= num_stages <= k:
        raise InvalidSpecError(f"{num_stages} stages for a model of {k} blocks", field="stages")
    costs = BlockSeconds(profile, hardware)
    best: tuple[float, int, tuple[tuple[int, int], ...]] | None = None
    for cuts in combinations(range(1, k), num_stages - 1):
        bounds = (0, *cuts, k)
        stages = tuple((bounds[i] + 1, bounds[i + 1]) for i in range(num_stages))
        slowest = max(costs.step_s(range(a - 1, b)) for a, b in stages)
        heaviest = max(
            sum(profile.blocks[i].param_bytes for i in range(a - 1, b)) for a, b in stages
        )
        key = (slowest, heaviest, stages)
        if best is None or key[:2] < best[:2]:
            best = key
    assert best is not None
    return best[2]


def partition_pipeline(
    profile: ParallelProfile,
    hardware: HardwareSpec,
    num_stages: int,
    replicas: int,
    micro_batches: int,
    batch_size: int,
    per_worker_memory_limit_bytes: int | None = None,
    schedule: Literal["2bw", "gpipe"] = "2bw",
) -> PipelinePlan | None:
    """PipeDream-2BW's planner, exhaustively: the contiguous split into ``num_stages`` stages
    with the shortest predicted iteration among those whose every worker fits the limit
    (``None``: no limit). Returns None when no split fits."""
    k = profile.blocks.num_blocks
    if not 1 <= num_stages <= k:
        raise InvalidSpecError(f"{num_stages} stages for a model of {k} blocks", field="stages")
    best: tuple[float, PipelinePlan] | None = None
    for cuts in combinations(range(1, k), num_stages - 1):
        bounds = (0, *cuts, k)
        stages = tuple((bounds[i] + 1, bounds[i + 1]) for i in range(num_stages))
        plan = PipelinePlan(k, stages, micro_batches, replicas, schedule)
        prediction = predict_pipeline(profile, hardware, plan, batch_size)
        if per_worker_memory_limit_bytes is not None and not prediction.fits(
            per_worker_memory_limit_bytes
        ):
            continue
        if best is None or prediction.iteration_time_s < best[0]:
            best = (prediction.iteration_time_s, plan)
    return None if best is None else best[1]
