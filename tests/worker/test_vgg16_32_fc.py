"""Part 5's model: over a 384 MB per-worker limit under data parallelism, within it under a
hybrid plan and under a 2BW pipeline that gives the classifier its own stage (measured by the
engines' own accounting, not predicted)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from jigsaw.model.parallelism import HybridPlan, PipelinePlan
from worker.hybrid import HybridConfig, HybridTrainer
from worker.pipeline import PipelineConfig, PipelineTrainer
from worker.spb.thread_collectives import run_threads
from worker.zoo import load_workload

LIMIT = 384 * 10**6
MODEL = "vgg16_32_fc"


def pipeline_bytes(plan: PipelinePlan, batch: int) -> list[int]:
    def body(rank: int, comm: Any) -> int:
        run = PipelineTrainer(PipelineConfig(MODEL, plan, batch, lr=0.01), comm).train(1)
        return run.param_bytes + run.gradient_bytes + run.optimizer_bytes + run.activation_bytes

    return run_threads(plan.num_workers, body)


def test_digits_at_32x32_are_real_images() -> None:
    data = load_workload(MODEL).make_data()
    inputs, targets = data.train.fetch(torch.arange(4))
    assert inputs.shape == (4, 3, 32, 32) and 0 <= inputs.min() and inputs.max() <= 1
    assert len(data.train) == 1438 and set(targets.tolist()) <= set(range(10))


@pytest.mark.slow
def test_exceeds_the_limit_under_data_parallelism_and_fits_under_pipeline_and_hybrid() -> None:
    data = pipeline_bytes(PipelinePlan(6, ((1, 6),), 1, replicas=1, schedule="gpipe"), 2)
    assert data[0] > LIMIT
    pipeline = pipeline_bytes(PipelinePlan(6, ((1, 5), (6, 6)), 2), 2)
    assert max(pipeline) <= LIMIT

    def hybrid(rank: int, comm: Any) -> int:
        plan = HybridPlan.suffix(6, 4, 6, "column")
        step = HybridTrainer(HybridConfig(MODEL, plan, 2, lr=0.01), comm).step()
        return (
            step.param_bytes + step.gradient_bytes + step.optimizer_bytes + (step.activation_bytes)
        )

    assert max(run_threads(4, hybrid)) <= LIMIT
