"""Pipeline and hybrid plans: construction, rank layout, and refusals that name the field."""

from __future__ import annotations

import pytest

from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.parallelism import HybridPlan, PipelinePlan, ShardedBlock


def refused(field: str, build) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidSpecError) as caught:
        build()
    assert caught.value.field == field, caught.value
    return str(caught.value)


def test_even_pipeline_layout_and_rank_mapping() -> None:
    plan = PipelinePlan.for_workers(num_blocks=5, num_workers=6, replicas=2, micro_batches=4)
    assert plan.stages == ((1, 2), (3, 3), (4, 5))
    assert plan.num_workers == 6
    assert [plan.stage_of(r) for r in range(6)] == [0, 1, 2, 0, 1, 2]
    assert plan.ranks_of_stage(1) == (1, 4)
    assert list(plan.blocks_of(0)) == [0, 1]
    assert plan.weight_versions() == 2
    assert "3-3" not in plan.describe() and "1-2,3,4-5" in plan.describe()


def test_pipeline_refusals_name_the_field() -> None:
    assert "only 4 blocks" in refused("stages", lambda: PipelinePlan.even(4, 5, 8))
    assert "do not divide" in refused(
        "replicas", lambda: PipelinePlan.for_workers(4, 6, replicas=4, micro_batches=4)
    )
    refused("stages", lambda: PipelinePlan(4, ((1, 2), (4, 4)), 2))  # gap
    refused("stages", lambda: PipelinePlan(4, ((1, 2), (3, 3)), 2))  # short
    refused("micro_batches", lambda: PipelinePlan.even(4, 4, micro_batches=2))
    refused("micro_batches", lambda: PipelinePlan.even(4, 2, micro_batches=0))
    refused("schedule", lambda: PipelinePlan.even(4, 2, 2, schedule="pipedream"))  # type: ignore[arg-type]
    plan = PipelinePlan.even(4, 2, 2, replicas=2)
    assert "do not divide" in refused("replicas", lambda: plan.check_workers(5))
    assert "4 workers" in refused("stages", lambda: plan.check_workers(6))
    # GPipe has no version limit, so fewer micro-batches than stages is allowed there.
    assert PipelinePlan.even(4, 4, 1, schedule="gpipe").weight_versions() == 1


def test_hybrid_plan_suffix_and_refusals() -> None:
    plan = HybridPlan.suffix(num_blocks=6, num_workers=4, first_sharded=6, layout="row")
    assert plan.data_parallel_blocks == (1, 2, 3, 4, 5)
    assert plan.layout_of(6) == "row" and plan.layout_of(2) is None
    plan.check_linear_layers([0, 0, 0, 0, 0, 3])
    message = refused("sharded", lambda: plan.check_linear_layers([0, 0, 0, 0, 1, 0]))
    assert "block 6 has no linear layer" in message
    refused("sharded", lambda: HybridPlan(4, 2, ()))
    refused("sharded", lambda: HybridPlan(4, 2, (ShardedBlock(5),)))
    refused("sharded", lambda: HybridPlan(4, 2, (ShardedBlock(3),)))  # not a suffix
    refused("sharded", lambda: HybridPlan(4, 2, (ShardedBlock(4), ShardedBlock(4))))
    refused("sharded", lambda: HybridPlan(4, 2, (ShardedBlock(4, "diagonal"),)))  # type: ignore[arg-type]
    refused("num_workers", lambda: HybridPlan(4, 0, (ShardedBlock(4),)))
