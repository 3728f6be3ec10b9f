"""Gradient noise in Adam's preconditioned space (AdamW); plain-gradient noise unchanged (SGD)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from torch import Tensor

from jigsaw.model.block_noise import parse_block_noise, two_batch_estimate
from jigsaw.model.plan import resolve_plan
from tests.worker.lease_reports import lease_report
from worker.runtime.summary import summarize
from worker.spb.collectives import Collectives
from worker.spb.gradient_sync import GradientSynchronizer
from worker.spb.model_plans import model_plan
from worker.spb.preconditioner import AdamPreconditioner, noise_preconditioner
from worker.spb.sampler import GlobalBatchSampler
from worker.spb.thread_collectives import run_threads
from worker.spb.trainer import SPBTrainer
from worker.spb.trainer_setup import TrainerConfig
from worker.zoo import load_workload

WORLD = 4
ADAMW = TrainerConfig(
    model="mlp",
    plan=model_plan("staircase", WORLD, "mlp"),
    batch_size=8,
    optimizer="adamw",
    lr=1e-3,
    weight_decay=0.01,
    seed=3,
)
SGD = TrainerConfig(**{**ADAMW.__dict__, "optimizer": "sgd", "lr": 0.05, "weight_decay": 0.0})


def _run(config: TrainerConfig, steps: int) -> list[SPBTrainer]:
    def body(rank: int, collectives: Collectives) -> SPBTrainer:
        trainer = SPBTrainer(config, collectives)
        trainer.run(steps)
        return trainer

    return run_threads(WORLD, body)


def _run_capturing_state(config: TrainerConfig) -> tuple[list[SPBTrainer], dict[str, Any]]:
    """Two iterations; rank 0's weights and optimizer state between them (the state the
    second iteration's gradients meet)."""

    def body(rank: int, collectives: Collectives) -> tuple[SPBTrainer, dict[str, Any]]:
        trainer = SPBTrainer(config, collectives)
        trainer.step()
        captured = {
            "blocks": [copy.deepcopy(block.state_dict()) for block in trainer.blocks],
            "optimizer": copy.deepcopy(trainer.optimizer.state_dict()),
        }
        trainer.step()
        return trainer, captured

    results = run_threads(WORLD, body)
    return [trainer for trainer, _ in results], results[0][1]


def _second_iteration_gradients(config: TrainerConfig, blocks: list[Any]) -> list[list[Tensor]]:
    """Single process, by hand: every rank's per-parameter gradients at iteration 1 (float64)."""
    workload = load_workload(config.model, seed=config.seed)
    for block, state in zip(workload.blocks, blocks, strict=True):
        block.load_state_dict(state)
    data = workload.make_data()
    params = [p for block in workload.blocks for p in block.parameters()]
    grads = []
    for rank in range(WORLD):
        sampler = GlobalBatchSampler(len(data.train), config.batch_size, WORLD, config.seed)
        sampler.next_indices(rank)  # iteration 0
        inputs, targets = data.train.fetch(sampler.next_indices(rank))
        for param in params:
            param.grad = None
        workload.loss(workload.forward(inputs), targets).backward()
        grads.append([p.grad.detach().double().clone() for p in params])  # type: ignore[union-attr]
    return grads


def _hand_estimate(
    per_rank: list[list[Tensor]], indices: list[int], ranks: tuple[int, ...], scale: list[Tensor]
) -> tuple[float, float]:
    """The two-batch estimate of the contributors' gradients, each element times ``scale``."""
    local = [torch.cat([(grads[i] * scale[i]).reshape(-1) for i in indices]) for grads in per_rank]
    mine = [local[r] for r in ranks]
    mean = torch.stack(mine).mean(dim=0)
    local_sqr = sum(float(g.dot(g)) for g in mine) / len(ranks)
    return two_batch_estimate(float(mean.dot(mean)), local_sqr, len(ranks))


def test_adamw_noise_equals_a_hand_computation_in_adams_preconditioned_space() -> None:
    trainers, captured = _run_capturing_state(ADAMW)
    per_rank = _second_iteration_gradients(ADAMW, captured["blocks"])
    # 1 / (sqrt(v / (1 - beta2^t)) + eps), t = 1: the optimizer state before the second step.
    group = captured["optimizer"]["param_groups"][0]
    beta2, eps = group["betas"][1], group["eps"]
    state = captured["optimizer"]["state"]
    assert all(float(state[i]["step"]) == 1.0 for i in state)
    scale = [
        1.0 / ((state[i]["exp_avg_sq"].double() / (1.0 - beta2)).sqrt() + eps)
        for i in range(len(state))
    ]
    plain = [torch.ones_like(s) for s in scale]
    plan = resolve_plan("staircase", WORLD, 4)
    workload = load_workload(ADAMW.model, seed=ADAMW.seed)
    sizes = [len(list(block.parameters())) for block in workload.blocks]
    raw = trainers[0].noise.raw if trainers[0].noise is not None else {}
    assert sorted(raw) == [2, 3, 4]  # block 1 has one contributor under the staircase
    for block in (2, 3, 4):
        first = sum(sizes[: block - 1])
        indices = list(range(first, first + sizes[block - 1]))
        ranks = plan.contributors(block)
        expected = _hand_estimate(per_rank, indices, ranks, scale)
        assert raw[block] == pytest.approx(expected, rel=1e-4)
        # The plain-gradient estimate is far from it: the test sees which space was used.
        unscaled = _hand_estimate(per_rank, indices, ranks, plain)
        assert abs(unscaled[1] - raw[block][1]) > 0.5 * abs(raw[block][1])
    # Contributors and receivers measured the same figures.
    snapshots = [t.noise_stats() for t in trainers]
    assert all(s == snapshots[0] for s in snapshots)
    vectors = [t.state_vector() for t in trainers]
    assert all(torch.equal(vectors[0], v) for v in vectors[1:])


def test_adamw_measures_nothing_before_its_first_step_then_every_step() -> None:
    # Before the first step Adam has no second moment: the observation is skipped, not taken
    # on plain gradients (the smoothed figures never mix the two spaces).
    first = _run(ADAMW, 1)[0]
    assert first.noise is not None and first.noise.raw == {}
    assert first.noise_stats() == ()
    stats = _run(ADAMW, 3)[0].noise_stats()
    assert [(s.block, s.observations, s.last_iteration) for s in stats] == [
        (2, 2, 2),
        (3, 2, 2),
        (4, 2, 2),
    ]
    # SGD measures from the first iteration on.
    assert [s.observations for s in _run(SGD, 3)[0].noise_stats()] == [3, 3, 3]


def _plain_squared_norm(self: GradientSynchronizer, block: int, gradient: Tensor) -> Tensor:
    """The squared norm the worker took before Adam-aware noise existed, verbatim."""
    return torch.linalg.vector_norm(gradient).square()  # type: ignore[no-any-return]


def test_sgd_statistics_are_bit_identical_to_the_plain_gradient_measurement(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    today = _run(SGD, 4)
    assert today[0]._preconditioner is None
    monkeypatch.setattr(GradientSynchronizer, "_squared_norm", _plain_squared_norm)
    before = _run(SGD, 4)
    assert today[0].noise_stats() == before[0].noise_stats()
    assert today[0].noise is not None and before[0].noise is not None
    assert today[0].noise.raw == before[0].noise.raw
    assert torch.equal(today[0].state_vector(), before[0].state_vector())


def test_adamw_statistics_differ_from_plain_gradient_ones_on_the_same_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    adam = _run(ADAMW, 4)[0]
    monkeypatch.setattr(GradientSynchronizer, "_squared_norm", _plain_squared_norm)
    plain = _run(ADAMW, 4)[0]
    # Same training (the measurement never touches the update), another space for the noise.
    assert torch.equal(adam.state_vector(), plain.state_vector())
    for a, p in zip(adam.noise_stats(), plain.noise_stats(), strict=True):
        assert a.block == p.block and a.observations == p.observations
        assert a.grad_var > 10.0 * p.grad_var  # |g / (sqrt(v_hat) + eps)| >> |g| here


def test_the_preconditioner_is_adams_for_adam_and_adamw_and_none_for_sgd() -> None:
    layer = torch.nn.Linear(3, 2)
    params = list(layer.parameters())
    assert noise_preconditioner(torch.optim.SGD(params, lr=0.1)) is None
    assert isinstance(noise_preconditioner(torch.optim.Adam(params)), AdamPreconditioner)
    optimizer = torch.optim.AdamW(params, betas=(0.9, 0.99), eps=1e-3, amsgrad=True)
    preconditioner = noise_preconditioner(optimizer)
    assert isinstance(preconditioner, AdamPreconditioner)
    assert not preconditioner.ready(params)
    for step_grad in (1.0, 0.0):
        for param in params:
            param.grad = torch.full_like(param, step_grad)
        optimizer.step()
    assert preconditioner.ready(params)
    # AMSGrad: the running max of v (after the first step, 0.01 * 1^2; v itself has decayed
    # to 0.0099), corrected by 1 - 0.99^2; every element of both tensors alike.
    v_hat = 0.01 / (1.0 - 0.99**2)
    flat = torch.full((8,), 2.0)
    expected = 8 * (2.0 / (v_hat**0.5 + 1e-3)) ** 2
    assert float(preconditioner.squared_norm(params, flat)) == pytest.approx(expected, rel=1e-5)


def test_a_lease_report_carries_the_preconditioned_statistics_unchanged() -> None:
    stats = _run(ADAMW, 3)[0].noise_stats()
    assert len(stats) == 3
    report = lease_report(
        end_iteration=3,
        plan=ADAMW.plan,
        num_blocks=4,
        losses=(2.0, 1.9, 1.8),
        samples=96,
        block_noise=stats,
    )
    outcome = summarize([report])
    assert outcome.noise_refused is None
    assert outcome.block_noise == stats
    stored = outcome.as_metrics()["block_noise"]
    assert parse_block_noise(stored, 4) == stats
