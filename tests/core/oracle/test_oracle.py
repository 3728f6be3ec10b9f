from __future__ import annotations

import json
from pathlib import Path

import pytest

from jigsaw.efficiency.table import EfficiencyTable
from jigsaw.model.errors import InvalidPlanError, InvalidSpecError
from jigsaw.model.hardware import preset, with_overrides
from jigsaw.model.plan import SPBPlan, full_backprop, staircase
from jigsaw.model.profiles import ANALYTIC, MEASURED
from jigsaw.oracle import Oracle
from jigsaw.oracle.profile_catalog import ProfileCatalog

SINGLE_NODE = ((0, 0), (0, 1), (0, 2), (0, 3))
ONE_PER_NODE = ((0, 0), (1, 0), (2, 0), (3, 0))


@pytest.fixture(scope="module")
def oracle() -> Oracle:
    return Oracle(preset("v100"), ProfileCatalog(use_measured=False), EfficiencyTable())


def test_spb_saves_compute_memory_on_partial_workers(oracle: Oracle) -> None:
    plan = staircase(4, oracle.num_blocks("resnet50_224"))
    p = oracle.predict("resnet50_224", 32, plan, SINGLE_NODE)
    compute, memory = p.per_worker_compute_s, p.per_worker_memory_bytes
    assert compute[0] > compute[1] > compute[2] > compute[3]
    assert memory[0] > memory[1] > memory[2] > memory[3]
    assert p.source == ANALYTIC


def test_spb_does_not_shorten_the_iteration(oracle: Oracle) -> None:
    k = oracle.num_blocks("resnet50_224")
    full = oracle.predict("resnet50_224", 32, full_backprop(4, k), SINGLE_NODE)
    spb = oracle.predict("resnet50_224", 32, staircase(4, k), SINGLE_NODE)
    assert spb.iteration_time_s == pytest.approx(full.iteration_time_s, rel=0.05)
    assert max(spb.per_worker_compute_s) == pytest.approx(max(full.per_worker_compute_s))


def test_bytes_follow_ring_allreduce_then_broadcast(oracle: Oracle) -> None:
    k = oracle.num_blocks("mlp")
    full = oracle.predict("mlp", 8, full_backprop(4, k), SINGLE_NODE)
    params = oracle.profiles.get("mlp").param_bytes
    assert full.per_worker_bytes_sent == (int(1.5 * params),) * 4  # 2(N-1)/N * P each
    alone = oracle.predict("mlp", 8, SPBPlan((0,), k), ((0, 0),))
    assert alone.per_worker_bytes_sent == (0,) and alone.communication_s == 0.0
    # d = (0, 3): blocks 1-3 have one contributor (broadcast P_1..3 to rank 1), block 4 two.
    blocks = oracle.profiles.get("mlp").blocks
    plan = SPBPlan((0, k - 1), k)
    sent = oracle.predict("mlp", 8, plan, SINGLE_NODE[:2]).per_worker_bytes_sent
    head = sum(b.param_bytes for b in blocks[: k - 1])
    assert sent == (head + blocks[-1].param_bytes, blocks[-1].param_bytes)


def test_inter_node_placement_communicates_slower(oracle: Oracle) -> None:
    plan = full_backprop(4, oracle.num_blocks("vgg16_224"))
    near = oracle.predict("vgg16_224", 32, plan, SINGLE_NODE)
    far = oracle.predict("vgg16_224", 32, plan, ONE_PER_NODE)
    assert far.communication_s > 5 * near.communication_s
    assert far.iteration_time_s > near.iteration_time_s


def test_colocated_workers_of_one_job_take_turns(oracle: Oracle) -> None:
    plan = full_backprop(2, oracle.num_blocks("resnet18_32"))
    spread = oracle.predict("resnet18_32", 64, plan, ((0, 0), (0, 1)))
    packed = oracle.predict("resnet18_32", 64, plan, ((0, 0), (0, 0)))
    assert packed.iteration_time_s == pytest.approx(2 * spread.iteration_time_s, rel=0.1)


def test_gpu_sharing_slows_only_when_summed_load_exceeds_one(oracle: Oracle) -> None:
    plan = full_backprop(1, oracle.num_blocks("resnet18_32"))
    alone = oracle.predict("resnet18_32", 64, plan, ((0, 0),))
    load = oracle.worker_load("resnet18_32", 64, plan, 0)
    assert 0.9 < load <= 1.0
    light = oracle.predict("resnet18_32", 64, plan, ((0, 0),), gpu_load={(0, 0): 1.0 - load})
    assert light.iteration_time_s == pytest.approx(alone.iteration_time_s)
    heavy = oracle.predict("resnet18_32", 64, plan, ((0, 0),), gpu_load={(0, 0): 1.0})
    assert heavy.iteration_time_s == pytest.approx((1.0 + load) * alone.iteration_time_s)
    assert oracle.goodput("resnet18_32", 64, plan, ((0, 0),), {(0, 0): 1.0}) < 1 / (
        alone.iteration_time_s
    )


def test_partial_worker_leaves_slack_for_packing(oracle: Oracle) -> None:
    plan = staircase(4, oracle.num_blocks("resnet50_224"))
    loads = [oracle.worker_load("resnet50_224", 64, plan, r) for r in range(4)]
    assert loads[0] > loads[3] and loads[3] < 0.75
    per_gpu = oracle.gpu_loads("resnet50_224", 64, plan, SINGLE_NODE)
    assert per_gpu[(0, 3)] == pytest.approx(loads[3])


def test_nic_contention_slows_inter_node_communication(oracle: Oracle) -> None:
    plan = full_backprop(4, oracle.num_blocks("vgg16_224"))
    free = oracle.predict("vgg16_224", 32, plan, ONE_PER_NODE)
    busy = oracle.predict("vgg16_224", 32, plan, ONE_PER_NODE, nic_load={0: 1.0})
    assert busy.communication_s > free.communication_s
    assert set(oracle.nic_loads("vgg16_224", 32, plan, ONE_PER_NODE)) == {0, 1, 2, 3}


def test_full_rate_and_eta_and_goodput(oracle: Oracle) -> None:
    one = oracle.full_rate("resnet50_224", 32, 1, 8)
    eight = oracle.full_rate("resnet50_224", 32, 8, 8)
    assert 0 < eight <= one
    k = oracle.num_blocks("resnet50_224")
    assert oracle.eta("resnet50_224", full_backprop(4, k)) == 1.0
    spb = staircase(4, k)
    assert oracle.eta("resnet50_224", spb) == pytest.approx(1 - 6 / 16)
    rate = 1 / oracle.predict("resnet50_224", 32, spb, SINGLE_NODE).iteration_time_s
    assert oracle.goodput("resnet50_224", 32, spb, SINGLE_NODE) == pytest.approx(
        rate * oracle.eta("resnet50_224", spb)
    )


def test_aliases_resolve_to_zoo_profiles(oracle: Oracle) -> None:
    assert oracle.num_blocks("cifar10") == oracle.num_blocks("resnet18_32")
    assert oracle.profiles.get("ResNet-50 (batch size 64)").model == "resnet50_224"
    assert oracle.profiles.get("bert").param_bytes == pytest.approx(4 * 109.5e6, rel=0.01)


def test_rejects_mismatched_inputs(oracle: Oracle) -> None:
    with pytest.raises(InvalidPlanError, match="blocks"):
        oracle.predict("mlp", 8, full_backprop(2, 7), SINGLE_NODE[:2])
    with pytest.raises(InvalidSpecError, match="placement"):
        oracle.predict("mlp", 8, full_backprop(2, 4), SINGLE_NODE)
    with pytest.raises(InvalidSpecError, match="batch"):
        oracle.predict("mlp", 0, full_backprop(2, 4), SINGLE_NODE[:2])
    with pytest.raises(InvalidSpecError, match="no profile"):
        oracle.num_blocks("alexnet")
    with pytest.raises(InvalidSpecError, match="preset"):
        preset("tpu")
    with pytest.raises(InvalidSpecError, match="overlap_fraction"):
        with_overrides(preset("v100"), overlap_fraction=2.0)


def test_measured_profile_wins_and_cpu_times_are_used(tmp_path: Path) -> None:
    blocks = [
        {
            "index": i,
            "name": f"b{i}",
            "forward_flops_per_sample": 1e6,
            "backward_flops_per_sample": 2e6,
            "param_bytes": 4000,
            "activation_bytes_per_sample": 1000,
            "forward_time_s_per_sample": 0.001,
            "backward_time_s_per_sample": 0.002,
        }
        for i in (1, 2, 3)
    ]
    (tmp_path / "mlp.json").write_text(
        json.dumps(
            {
                "model": "mlp",
                "num_blocks": 3,
                "input_shape": [784],
                "profiled_batch_size": 16,
                "device": "cpu",
                "torch_version": "2.x",
                "created": "now",
                "command": "test",
                "blocks": blocks,
            }
        )
    )
    catalog = ProfileCatalog(tmp_path)
    cpu = Oracle(preset("cpu"), catalog, EfficiencyTable())
    assert cpu.num_blocks("mlp") == 3
    p = cpu.predict("mlp", 10, full_backprop(1, 3), ((0, 0),))
    assert p.source == MEASURED
    overhead = preset("cpu").iteration_overhead_s
    assert p.per_worker_compute_s[0] == pytest.approx(overhead + 10 * 3 * 0.003)
    (tmp_path / "digits_cnn.json").write_text('{"model": "digits_cnn", "blocks": []}')
    with pytest.raises(InvalidSpecError, match="non-empty"):
        catalog.get("digits_cnn")


def test_contention_never_speeds_an_iteration_up(oracle: Oracle) -> None:
    models = ("resnet50_224", "resnet18_32", "gpt_small", "vgg16_224")
    calls = []
    for i in range(2000):
        model = models[i % 4]
        n = (1, 2, 4, 8, 16)[i % 5]
        k = oracle.num_blocks(model)
        plan = staircase(n, k) if i % 2 else full_backprop(n, k)
        placement = tuple(((i + r // 8) % 128, r % 8) for r in range(n))
        calls.append((model, 32, plan, placement))
    load = {(node, g): 0.3 for node in range(128) for g in range(8)}
    for call in calls:
        oracle.predict(*call)  # warm the per-plan caches, as a scheduler round would
    # The latency itself is a benchmark figure (bench/oracle_calibration.py --latency);
    # here: contention only ever slows an iteration down.
    for call in calls:
        contended = oracle.predict(*call, gpu_load=load)
        alone = oracle.predict(*call)
        assert contended.iteration_time_s >= alone.iteration_time_s
