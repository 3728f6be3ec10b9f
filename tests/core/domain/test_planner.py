"""The plan's one owner (:class:`jigsaw.planning.planner.Planner`): built from the hardware, the
memory limit and the catalog, handed to every policy by the builder, no process-wide state;
its engine rules (a hybrid's shard widths) and its memory messages."""

from __future__ import annotations

import pytest

from jigsaw.model.decisions import Replan, Resize, Start
from jigsaw.model.domain import Job, JobSpec
from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.hardware import DEFAULT_GPU_TYPE, preset
from jigsaw.model.parallelism import HybridPlan, ShardedBlock
from jigsaw.model.plan import SPBPlan, full_backprop
from jigsaw.model.sizes import human_bytes
from jigsaw.oracle import Oracle
from jigsaw.planning.catalog import ModelCatalog
from jigsaw.planning.planner import Planner
from jigsaw.policies.base import policy_names
from jigsaw.policies.builder import build_policy

VGG = JobSpec(name="big", model="vgg16_32_fc", workers=2, iterations=5)


def test_the_builder_hands_every_policy_the_planner_it_is_given() -> None:
    oracle = Oracle(preset("v100"))
    planner = Planner(preset("v100"), memory_limit_bytes=3 * 2**30)
    for name in policy_names():
        assert build_policy(name, oracle, planner=planner).planner is planner  # type: ignore[attr-defined]


def test_the_simulator_plans_for_the_traces_gpu_type() -> None:
    for gpu in ("a100", "k80", DEFAULT_GPU_TYPE):
        policy = build_policy("las", Oracle(preset(gpu)))
        assert policy.planner.hardware.name == gpu  # type: ignore[attr-defined]


def test_two_planners_in_one_process_do_not_share_a_choice() -> None:
    roomy = Planner(preset("v100"))
    choice = roomy.plan_choice(VGG)
    assert choice is not None and choice.chosen.kind == "data"
    data = choice.alternatives[0].prediction.max_model_bytes
    tight = Planner(preset("v100"), memory_limit_bytes=data // 2 + data // 4)
    assert tight.plan_type(VGG) in ("pipeline", "hybrid")
    assert roomy.plan_type(VGG) == "data"  # building the tight one changed nothing here
    assert Planner().plan_type(VGG) == "data"


def test_k_comes_from_the_job_report_else_the_catalog() -> None:
    planner = Planner(catalog=ModelCatalog())
    own = Job("e", JobSpec(name="e", model="pkg.mod:fn", workers=2, iterations=1), 0.0)
    assert planner.num_blocks(own) is None
    assert planner.start_plan(own) == SPBPlan((0, 0), 1)
    reported = Job("e", own.spec, 0.0, model_blocks=5)
    assert planner.num_blocks(reported) == 5
    assert planner.model_blocks("digits_cnn") == 4


@pytest.mark.parametrize(
    ("plan", "layers", "message"),
    [
        (HybridPlan.suffix(4, 11, 4), [(4, 128, 10)], r"block 4: out_features of 10 .* 11 workers"),
        (HybridPlan(4, 3, (ShardedBlock(4, "row"),)), [(4, 2, 10)], r"in_features of 2 .* 3"),
        (HybridPlan.suffix(4, 10, 4), [(4, 128, 10)], None),
        (HybridPlan.suffix(4, 64, 4), [(3, 128, 1), (4, 128, 64)], None),  # block 3 is not sharded
    ],
)  # fmt: skip
def test_a_hybrid_needs_a_slice_of_every_sharded_layer_for_every_worker(
    plan: HybridPlan, layers: list[tuple[int, int, int]], message: str | None
) -> None:
    if message is None:
        plan.check_shardable(layers)
        return
    with pytest.raises(InvalidSpecError, match=message) as caught:
        plan.check_shardable(layers)
    assert caught.value.field == "workers"


@pytest.mark.parametrize(
    ("size", "shown"),
    [
        (0, "0 B"),
        (100, "100 B"),
        (1000, "0.98 KiB"),
        (100 * 1024, "100.00 KiB"),
        (600_000, "0.57 MiB"),
        (int(0.175 * 2**30), "0.17 GiB"),
        (31 * 2**30, "31.00 GiB"),
        (7 * 2**40, "7.00 TiB"),
    ],
)
def test_sizes_show_their_number(size: int, shown: str) -> None:
    assert human_bytes(size) == shown


def test_a_resize_carries_its_size_in_its_plan_only() -> None:
    four = ((0, 0), (0, 1), (0, 2), (0, 3))
    planner = Planner()
    job = Job("e", JobSpec(name="e", model="digits_cnn", workers=2, iterations=9), 0.0)
    plan = planner.resized_plan(job, 4)
    resize = Resize("e", four, plan, 16, "grow")
    assert resize.plan.num_workers == len(resize.placement) == 4
    with pytest.raises(ValueError, match="plan has 2 workers but the placement 4 GPUs"):
        Resize("e", four, planner.resized_plan(job, 2), 16, "grow")
    with pytest.raises(ValueError, match="worker_batch"):
        Resize("e", four, plan, 0, "grow")


def test_a_start_and_a_replan_carry_their_size_in_their_plan_as_a_resize_does() -> None:
    four = ((0, 0), (0, 1), (0, 2), (0, 3))
    assert Start("s", four, full_backprop(4, 4), "fits").plan.num_workers == 4
    assert Replan("r", SPBPlan((0, 1, 2, 3), 4), four, "slack").plan.num_workers == 4
    with pytest.raises(ValueError, match="start of s: the plan has 2 workers but the placement 4"):
        Start("s", four, full_backprop(2, 4), "fits")
    with pytest.raises(ValueError, match="re-plan of r: the plan has 3 workers but the placement"):
        Replan("r", SPBPlan((0, 1, 2), 4), four, "slack")


@pytest.mark.parametrize(
    ("fields", "field", "phrase"),
    [
        ({"model": "vgg16_32", "workers": 4, "batch_size": 128}, "batch_size", "use batch_size 64"),
        ({"model": "vgg16_32", "workers": 257, "batch_size": 1}, "workers", "at most 256 workers"),
        (
            {
                "model": "mlp",
                "workers": 2,
                "min_workers": 1,
                "max_workers": 4,
                "batch_policy": "adaptive",
                "min_global_batch": 32,
                "max_global_batch": 4096,
            },
            "max_global_batch",
            "max_global_batch 4096 exceeds the 1438 training samples",
        ),
    ],
)
def test_the_largest_global_batch_must_fit_the_training_split(
    fields: dict[str, object], field: str, phrase: str
) -> None:
    spec = JobSpec.from_mapping({"name": "b", "iterations": 1, "parallelism": "data", **fields})
    with pytest.raises(InvalidSpecError) as caught:
        Planner(memory_limit_bytes=2**50).check(spec)
    assert caught.value.field == field and phrase in str(caught.value)
