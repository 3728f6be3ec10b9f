"""The Plan union: every kind round-trips through its JSON form, and the oracle and the
simulator's rate model price pipeline and hybrid plans through the plan-type predictions."""

from __future__ import annotations

import pytest

from jigsaw.model.domain import Job, JobSpec
from jigsaw.model.errors import InvalidPlanError, InvalidSpecError
from jigsaw.model.hardware import preset
from jigsaw.model.parallelism import HybridPlan, PipelinePlan
from jigsaw.model.plan import Plan, SPBPlan, plan_from_json, plan_to_json
from jigsaw.oracle import Oracle
from jigsaw.oracle.parallel_profile import parallel_profile_of
from jigsaw.oracle.plan_predictions import predict_plan
from jigsaw.oracle.profile_catalog import ProfileCatalog
from jigsaw.simulator.rates import OracleRate

PLANS: list[Plan] = [
    SPBPlan((0, 1, 2, 3), 4),
    PipelinePlan(6, ((1, 3), (4, 5), (6, 6)), micro_batches=6, replicas=2, schedule="gpipe"),
    HybridPlan.suffix(6, 4, 5, "column"),
]


@pytest.mark.parametrize("plan", PLANS, ids=lambda p: p.kind)
def test_every_kind_round_trips_through_json(plan: Plan) -> None:
    data = plan_to_json(plan)
    assert data["kind"] == plan.kind
    back = plan_from_json(data)
    assert back == plan and type(back) is type(plan)
    assert (back.num_workers, back.num_blocks) == (plan.num_workers, plan.num_blocks)
    assert back.describe() == plan.describe()


def test_kinds_and_worker_counts() -> None:
    assert [p.kind for p in PLANS] == ["spb", "pipeline", "hybrid"]
    assert [p.num_workers for p in PLANS] == [4, 6, 4]


@pytest.mark.parametrize(
    "data,field",
    [
        ({"kind": "tensor"}, "spb"),
        ({"kind": "pipeline", "num_blocks": 4}, "spb"),
        (
            {
                "kind": "pipeline",
                "num_blocks": 2,
                "stages": [[1, 1], [2, 2], [3, 3]],
                "micro_batches": 4,
            },
            "stages",
        ),
        (
            {
                "kind": "hybrid",
                "num_blocks": 4,
                "num_workers": 2,
                "sharded": [{"block": 2, "layout": "column"}],
            },
            "sharded",
        ),
    ],
)
def test_malformed_plan_json_is_refused_naming_what_is_wrong(
    data: dict[str, object], field: str
) -> None:
    with pytest.raises(InvalidSpecError) as caught:
        plan_from_json(data)
    assert caught.value.field == field
    if field == "spb":
        assert isinstance(caught.value, InvalidPlanError)


def test_shipped_profiles_carry_what_pipeline_and_hybrid_predictions_need() -> None:
    profiles = ProfileCatalog()
    vgg = parallel_profile_of(profiles.get("vgg16_32_fc"))
    assert vgg is not None
    assert vgg.output_bytes_per_sample[-1] == 10 * 4  # ten class scores, FP32
    assert vgg.linear_counts() == (0, 0, 0, 0, 0, 3)
    # Analytic profiles (trace aliases) say nothing of block outputs: data parallel only.
    assert parallel_profile_of(profiles.get("bert")) is None


def test_oracle_prices_a_pipeline_at_the_global_batch_of_data_parallelism() -> None:
    oracle = Oracle(preset("v100"))
    plan = PipelinePlan(6, ((1, 4), (5, 6)), micro_batches=4, replicas=2)
    got = oracle.predict("vgg16_32_fc", 16, plan, oracle.compact(4))
    profile = parallel_profile_of(oracle.profiles.get("vgg16_32_fc"))
    assert profile is not None
    # batch 16 per worker x 4 workers = 64 samples: 2 replicas of 32 (2 stages x 16).
    expected = predict_plan(profile, oracle.hardware, plan, 32)
    assert expected.samples_per_iteration == 64
    assert got.iteration_time_s == pytest.approx(expected.iteration_time_s)
    assert got.per_worker_memory_bytes == expected.per_worker_memory_bytes
    assert oracle.eta("vgg16_32_fc", plan) == 1.0


def test_rate_model_gives_a_hybrid_job_the_oracles_iteration_time_and_slows_it_when_shared() -> (
    None
):
    oracle = Oracle(preset("v100"))
    rates = OracleRate(oracle, gpus_per_node=4)
    plan = HybridPlan.suffix(6, 2, 6)
    job = Job("h", JobSpec("h", "vgg16_32_fc", 2, 10, batch_size=8), 0.0)
    placement = oracle.compact(2)
    alone = oracle.predict_plan_type("vgg16_32_fc", 8, plan).iteration_time_s
    assert rates.rate(job, placement, plan, {}) == pytest.approx(1.0 / alone)
    loads = rates.load(job, placement, plan)
    assert set(loads) == set(placement) and all(0 < v <= 1 for v in loads.values())
    shared = rates.rate(job, placement, plan, {placement[0]: 0.9})
    assert shared < rates.rate(job, placement, plan, {})
    timing = rates.timing(job, placement, plan)
    assert timing is not None and timing.alone_s == pytest.approx(alone)


def test_a_model_without_block_outputs_cannot_be_priced_as_a_pipeline() -> None:
    oracle = Oracle(preset("v100"))
    plan = PipelinePlan(4, ((1, 2), (3, 4)), micro_batches=2)
    with pytest.raises(InvalidSpecError) as caught:
        oracle.predict("bert", 4, plan, oracle.compact(2))
    assert caught.value.field == "parallelism"
