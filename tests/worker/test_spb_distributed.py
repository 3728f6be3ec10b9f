"""The SPB engine across real processes: gloo, torch.multiprocessing spawn, 4 ranks. The runs
are defined in tests/worker/spb_gloo.py and executed once per session in one process group
(fixture ``spb_gloo``); these tests check what they recorded."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import Tensor

from jigsaw.model.plan import SPBPlan, resolve_plan
from tests.worker.spb_gloo import STAIRCASE, STAIRCASE_STEPS, WORLD
from worker.spb.sampler import GlobalBatchSampler
from worker.spb.trainer_setup import TrainerConfig
from worker.zoo import Workload, load_workload

pytestmark = pytest.mark.distributed
Runs = dict[str, list[dict[str, Any]]]


def load_state_vector(workload: Workload, vector: Tensor) -> None:
    """Inverse of SPBTrainer.state_vector: parameters first, then buffers."""
    tensors = list(workload.parameters())
    tensors += [b for block in workload.blocks for b in block.buffers()]
    offset = 0
    with torch.no_grad():
        for tensor in tensors:
            count = tensor.numel()
            tensor.copy_(vector[offset : offset + count].view_as(tensor).to(tensor.dtype))
            offset += count
    assert offset == vector.numel()


def reference_block_gradients(
    workload: Workload, config: TrainerConfig, plan: SPBPlan, step: int
) -> list[Tensor]:
    """Single-process reference: per block, the mean over its contributors of each rank's
    full-backprop gradient on that rank's shard at ``step``."""
    data = workload.make_data()
    per_rank: list[list[Tensor]] = []
    for rank in range(plan.num_workers):
        sampler = GlobalBatchSampler(len(data.train), config.batch_size, WORLD, config.seed)
        for _ in range(step):
            sampler.next_indices(rank)
        inputs, targets = data.train.fetch(sampler.next_indices(rank))
        for param in workload.parameters():
            param.grad = None
        workload.loss(workload.forward(inputs), targets).backward()
        per_rank.append(
            [torch.cat([p.grad.reshape(-1) for p in b.parameters()]) for b in workload.blocks]
        )
    return [
        torch.stack([per_rank[r][b - 1] for r in plan.contributors(b)]).mean(dim=0)
        for b in range(1, plan.num_blocks + 1)
    ]


def test_plan_none_matches_torch_ddp(spb_gloo: Runs) -> None:
    steps = 5
    ours, ddp = spb_gloo["none"], spb_gloo["ddp"]
    assert len(ours[0]["states"]) == len(ddp[0]["states"]) == steps
    num_params = ddp[0]["states"][0].numel()
    for rank in range(WORLD):
        for step in range(steps):
            ours_params = ours[rank]["states"][step][:num_params]
            diff = (ours_params - ddp[rank]["states"][step]).abs().max().item()
            assert diff <= 1e-6, f"rank {rank} step {step}: max |SPB - DDP| = {diff}"


def test_staircase_applies_mean_over_contributors_and_keeps_replicas_identical(
    spb_gloo: Runs,
) -> None:
    config, steps = STAIRCASE, STAIRCASE_STEPS
    results = spb_gloo["staircase"]
    plan = resolve_plan("staircase", WORLD, 4)
    assert results[3]["depths"] == [3] * steps
    for step in range(steps):
        for rank in range(1, WORLD):
            assert torch.equal(results[rank]["states"][step], results[0]["states"][step]), (
                f"rank {rank} weights differ from rank 0 after step {step}"
            )
            for block in range(4):
                assert torch.equal(
                    results[rank]["grads"][step][block], results[0]["grads"][step][block]
                )
    reference = load_workload(config.model, seed=config.seed)
    for step in range(steps):
        if step > 0:
            load_state_vector(reference, results[0]["states"][step - 1])
        expected = reference_block_gradients(reference, config, plan, step)
        for block, want in enumerate(expected, start=1):
            got = results[0]["grads"][step][block - 1]
            diff = (got - want).abs().max().item()
            assert diff <= 1e-6, f"step {step} block {block}: |applied - reference| = {diff}"
    # Rank 3 (depth 3) trains only block 4: fewest saved activations, nothing to reduce but
    # the world all-reduce of block 4 and the BN buffers.
    saved = [results[r]["metrics"][0]["saved_activation_bytes"] for r in range(WORLD)]
    assert saved == sorted(saved, reverse=True) and len(set(saved)) == WORLD


def test_plan_switch_mid_run_keeps_replicas_identical_and_loss_continuous(spb_gloo: Runs) -> None:
    steps = 8  # switches to staircase at 3, to uniform:2 at 6
    a, b = spb_gloo["switched"], spb_gloo["steady"]
    assert [a[r]["depths"][3] for r in range(WORLD)] == [0, 1, 2, 3]
    assert [a[r]["depths"][7] for r in range(WORLD)] == [0, 2, 2, 2]
    for step in range(steps):
        for rank in range(1, WORLD):
            assert torch.equal(a[rank]["states"][step], a[0]["states"][step])
    # Before the switch the runs are the same run; the first switched iteration starts from the
    # same weights, so its loss is the steady run's loss (the plan only changes its gradients).
    for rank in range(WORLD):
        assert a[rank]["losses"][:4] == b[rank]["losses"][:4]
    assert a[0]["losses"][-1] < a[0]["losses"][0]


def test_checkpoint_resume_reproduces_the_uninterrupted_run(spb_gloo: Runs) -> None:
    # 7 steps under staircase, checkpointed at 3 with a switch to uniform:1 pending at 5 (it
    # must survive the restore); a fresh trainer resumes from that checkpoint.
    a, b = spb_gloo["full"], spb_gloo["resumed"]
    for rank in range(WORLD):
        assert b[rank]["iterations"] == [3, 4, 5, 6]
        assert a[rank]["losses"][3:] == b[rank]["losses"]
        for got, want in zip(b[rank]["states"], a[rank]["states"][3:], strict=True):
            assert torch.equal(got, want)
        assert b[rank]["depths"] == a[rank]["depths"][3:]
