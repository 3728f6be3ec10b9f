"""The oracle's predictions for pipeline and hybrid plans (pure: hand-made profiles)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.hardware import preset, with_overrides
from jigsaw.model.parallelism import HybridPlan, PipelinePlan
from jigsaw.model.profiles import MEASURED, BlockProfile, ModelProfile
from jigsaw.oracle.parallel_profile import LinearLayer, ParallelProfile
from jigsaw.oracle.plan_partitions import balanced_stages, partition_pipeline
from jigsaw.oracle.plan_predictions import (
    predict_data_parallel,
    predict_hybrid,
    predict_pipeline,
    predict_plan,
)
from jigsaw.oracle.profile_catalog import ProfileCatalog

HW = with_overrides(preset("cpu"), gpus_per_node=8, iteration_overhead_s=0.0)
PARAMS = (4000, 4000, 4000, 400_000)
ACTS = (100, 100, 100, 10)


def profile() -> ParallelProfile:
    blocks = tuple(
        BlockProfile(i + 1, f"b{i + 1}", 1e6, 2e6, PARAMS[i], ACTS[i], 1e-4, 2e-4) for i in range(4)
    )
    model = ModelProfile("toy", blocks, MEASURED, 16, "cpu (test)")
    return ParallelProfile(model, (400, 400, 400, 40), (LinearLayer(4, 1000, 100),))


def test_data_parallel_memory_bytes_and_time() -> None:
    p = predict_data_parallel(profile().blocks, HW, num_workers=4, batch_size=8)
    total = sum(PARAMS)
    memory = p.per_worker_memory[0]
    assert (memory.params, memory.gradients, memory.optimizer) == (total, total, total)
    assert memory.activations == 8 * sum(ACTS)
    assert p.per_worker_bytes_sent[0] == round(1.5 * total)
    assert p.per_worker_compute_s[0] == pytest.approx(8 * 4 * 3e-4)
    assert p.iteration_time_s == pytest.approx(p.per_worker_compute_s[0] + p.communication_s)


def test_2bw_keeps_two_versions_and_fewer_activations_than_gpipe() -> None:
    two = PipelinePlan(4, ((1, 3), (4, 4)), micro_batches=4, replicas=2)
    gpipe = PipelinePlan(4, ((1, 3), (4, 4)), micro_batches=4, replicas=2, schedule="gpipe")
    a = predict_pipeline(profile(), HW, two, batch_size=16)
    b = predict_pipeline(profile(), HW, gpipe, batch_size=16)
    last = a.per_worker_memory[1]
    assert last.params == 2 * PARAMS[3] and b.per_worker_memory[1].params == PARAMS[3]
    # Stage 0 of 2 has 2 micro-batches of 4 samples in flight under 1F1B, GPipe all 4.
    assert a.per_worker_memory[0].activations == 2 * 4 * 300
    assert b.per_worker_memory[0].activations == 4 * 4 * 300
    # Stage 0 sends its output forward, stage 1 the input gradient back, plus the all-reduce.
    assert a.per_worker_bytes_sent[0] == 16 * 400 + sum(PARAMS[:3])
    assert a.per_worker_bytes_sent[1] == 16 * 400 + PARAMS[3]
    # GPipe pays the fill/drain bubble every batch: (m + S - 1) vs m micro-batch times.
    assert b.iteration_time_s > a.iteration_time_s
    assert predict_pipeline(profile(), HW, two, 16, lease_iterations=1).iteration_time_s > (
        a.iteration_time_s
    )
    assert a.samples_per_iteration == 32


def test_hybrid_shards_the_linear_layer_and_pays_activation_traffic() -> None:
    plan = HybridPlan.suffix(4, 4, 4, "column")
    hybrid = predict_hybrid(profile(), HW, plan, batch_size=8)
    data = predict_data_parallel(profile().blocks, HW, 4, 8)
    linear = 1000 * 100 * 4 + 100 * 4
    held = sum(PARAMS) - linear + linear // 4
    assert hybrid.per_worker_memory[0].params == held
    assert hybrid.per_worker_memory[0].total < data.per_worker_memory[0].total
    # Global batch 32: gather of block-3 outputs + labels, then the layer's two collectives.
    expected = 1.5 * (sum(PARAMS[:3]) + 32 * 400 + 32 * 8 + 32 * 100 * 4 + 32 * 1000 * 4)
    assert hybrid.per_worker_bytes_sent[0] == round(expected)
    with pytest.raises(InvalidSpecError) as caught:
        predict_hybrid(profile(), HW, HybridPlan.suffix(4, 4, 3), 8)
    assert caught.value.field == "sharded"


def test_balanced_stages_split_by_compute() -> None:
    assert balanced_stages(profile().blocks, HW, 2) == ((1, 2), (3, 4))
    assert balanced_stages(profile().blocks, HW, 4) == ((1, 1), (2, 2), (3, 3), (4, 4))
    with pytest.raises(InvalidSpecError):
        balanced_stages(profile().blocks, HW, 5)


def test_vgg16_32_fc_exceeds_a_per_worker_limit_only_under_data_parallelism() -> None:
    """Part 5's model: with 384 MB per worker, data parallelism does not fit, a pipeline that
    gives the classifier a stage of its own and a hybrid that shards it both do."""
    blocks = ProfileCatalog().get("vgg16_32_fc")
    assert blocks.num_blocks == 6 and blocks.source == MEASURED
    layers = (
        LinearLayer(6, 512, 4096),
        LinearLayer(6, 4096, 4096),
        LinearLayer(6, 4096, 10),
    )
    vgg = ParallelProfile(blocks, (65536, 32768, 16384, 8192, 2048, 40), layers)
    hw = with_overrides(preset("cpu"), gpus_per_node=4, workspace_bytes=0)
    limit = 384 * 10**6
    data = predict_plan(vgg, hw, 4, batch_size=8)
    pipeline = predict_plan(vgg, hw, PipelinePlan(6, ((1, 5), (6, 6)), 4, replicas=2), 16)
    hybrid = predict_plan(vgg, hw, HybridPlan.suffix(6, 4, 6, "column"), 8)
    assert not data.fits(limit)
    assert pipeline.fits(limit) and hybrid.fits(limit)
    # The planner finds a split under the limit, and none under an impossible one.
    chosen = partition_pipeline(vgg, hw, 2, 2, 4, 16, limit)
    assert chosen is not None and predict_plan(vgg, hw, chosen, 16).fits(limit)
    assert partition_pipeline(vgg, hw, 2, 2, 4, 16, 100 * 10**6) is None
    with pytest.raises(InvalidSpecError):
        predict_plan(vgg, hw, 0, 8)


@pytest.mark.parametrize(
    ("describe", "says"),
    [
        (lambda: predict_data_parallel(profile().blocks, HW, 1, 8).describe, "data x 1 worker"),
        (lambda: predict_data_parallel(profile().blocks, HW, 4, 8).describe, "data x 4 workers"),
        (lambda: PipelinePlan.even(4, 2, 2).describe(), "x 1 replica, 2 micro-batches"),
        (lambda: PipelinePlan.even(4, 2, 4, 2).describe(), "x 2 replicas, 4 micro-batches"),
        (lambda: PipelinePlan.even(4, 2, 1, 1, "gpipe").describe(), "x 1 replica, 1 micro-batch"),
        (lambda: HybridPlan.suffix(4, 2, 4).describe(), "hybrid x 2 workers,"),
    ],
    ids=["data 1", "data 4", "pipeline 1 replica", "pipeline 2", "gpipe 1 micro-batch", "hybrid"],
)
def test_plan_descriptions_count_in_words(describe: Callable[[], str], says: str) -> None:
    """``1 worker``, ``1 replica``: the counts people read in the plan-type tables."""
    assert says in describe()
    assert "1 workers" not in describe() and "1 replicas" not in describe()
