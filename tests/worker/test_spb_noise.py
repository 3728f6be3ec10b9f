"""Per-block gradient-noise statistics measured by the SPB engine."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch

from jigsaw.model.block_noise import BlockNoise, two_batch_estimate
from jigsaw.model.plan import SPBPlan, full_backprop, resolve_plan
from tests.worker.lease_reports import lease_report
from worker.runtime.summary import summarize
from worker.spb.collectives import Collectives
from worker.spb.launch import spawn_local
from worker.spb.model_plans import model_plan
from worker.spb.sampler import GlobalBatchSampler
from worker.spb.thread_collectives import run_threads
from worker.spb.trainer import SPBTrainer
from worker.spb.trainer_setup import TrainerConfig
from worker.zoo import load_workload

WORLD = 4
MLP = TrainerConfig(
    model="mlp", plan=model_plan("staircase", WORLD, "mlp"), batch_size=8, lr=0.05, seed=5
)


def _with(config: TrainerConfig, **changes: Any) -> TrainerConfig:
    return TrainerConfig(**{**config.__dict__, **changes})


def _run(config: TrainerConfig, steps: int) -> list[SPBTrainer]:
    def body(rank: int, collectives: Collectives) -> SPBTrainer:
        trainer = SPBTrainer(config, collectives)
        trainer.run(steps)
        return trainer

    return run_threads(WORLD, body)


def _per_rank_block_gradients(config: TrainerConfig) -> list[list[torch.Tensor]]:
    """Single process: every rank's full gradient of every block at the first iteration."""
    workload = load_workload(config.model, seed=config.seed)
    data = workload.make_data()
    grads = []
    for rank in range(WORLD):
        sampler = GlobalBatchSampler(len(data.train), config.batch_size, WORLD, config.seed)
        inputs, targets = data.train.fetch(sampler.next_indices(rank))
        for param in workload.parameters():
            param.grad = None
        workload.loss(workload.forward(inputs), targets).backward()
        grads.append(
            [torch.cat([p.grad.reshape(-1) for p in b.parameters()]) for b in workload.blocks]
        )
    return grads


def test_raw_statistics_equal_the_estimator_on_the_contributors_gradients() -> None:
    trainers = _run(MLP, 1)
    plan = resolve_plan("staircase", WORLD, 4)
    grads = _per_rank_block_gradients(MLP)
    raw = trainers[0].noise.raw if trainers[0].noise is not None else {}
    # Block 1 has one contributor under the staircase: nothing to estimate, nothing reported.
    assert sorted(raw) == [2, 3, 4]
    for block in (2, 3, 4):
        ranks = plan.contributors(block)
        local = [grads[r][block - 1] for r in ranks]
        mean = torch.stack(local).mean(dim=0)
        local_sqr = sum(float(g.dot(g)) for g in local) / len(ranks)
        expected = two_batch_estimate(float(mean.dot(mean)), local_sqr, len(ranks))
        assert raw[block] == pytest.approx(expected, rel=1e-4, abs=1e-7)
    # Every rank (contributors and receivers) holds the same statistics.
    snapshots = [t.noise_stats() for t in trainers]
    assert all(s == snapshots[0] for s in snapshots)
    assert [s.block for s in snapshots[0]] == [2, 3, 4]
    assert [s.contributors for s in snapshots[0]] == [2, 3, 4]


def test_probe_iterations_measure_single_contributor_blocks_and_keep_replicas_identical() -> None:
    trainers = _run(_with(MLP, plan=model_plan("uniform:3", WORLD, "mlp"), noise_probe_every=5), 10)
    history = list(trainers[1].history)
    assert [m.iteration for m in history if m.probe] == [4, 9]
    assert all(m.depth == (0 if m.probe else 3) for m in history)
    stats = {s.block: s for s in trainers[0].noise_stats()}
    # uniform:3 leaves blocks 1-3 to rank 0 alone: only the two probes measured them.
    assert [stats[b].observations for b in (1, 2, 3, 4)] == [2, 2, 2, 10]
    assert stats[1].contributors == WORLD and stats[1].last_iteration == 9
    vectors = [t.state_vector() for t in trainers]
    assert all(torch.equal(vectors[0], v) for v in vectors[1:])


def test_no_probe_when_every_block_has_two_contributors() -> None:
    trainers = _run(_with(MLP, plan=model_plan("0,0,1,1", WORLD, "mlp"), noise_probe_every=2), 4)
    assert not any(m.probe for m in trainers[0].history)
    assert [s.observations for s in trainers[0].noise_stats()] == [4, 4, 4, 4]


def test_measurement_can_be_switched_off_and_then_sends_no_extra_bytes() -> None:
    on = _run(_with(MLP, plan=full_backprop(WORLD, 4)), 1)[0].history[-1].bytes_sent
    off_trainer = _run(_with(MLP, plan=full_backprop(WORLD, 4), gradient_noise=False), 1)[0]
    assert off_trainer.noise_stats() == ()
    # One float32 per block, all-reduced among 4: 2 * 3/4 * 4 bytes * 4 blocks.
    assert on - off_trainer.history[-1].bytes_sent == 24


def _gloo_rank(rank: int, collectives: Collectives, out: str) -> None:
    trainer = SPBTrainer(_with(MLP, plan=full_backprop(collectives.world_size, 4)), collectives)
    trainer.run(12)
    stats = [s.as_dict() for s in trainer.noise_stats()]
    Path(out, f"rank{rank}.json").write_text(json.dumps(stats))


@pytest.mark.slow
@pytest.mark.distributed
def test_two_rank_gloo_run_reports_per_block_statistics(tmp_path: Path) -> None:
    spawn_local(_gloo_rank, 2, str(tmp_path))
    reports = [json.loads(Path(tmp_path, f"rank{r}.json").read_text()) for r in range(2)]
    assert reports[0] == reports[1]
    # Full backprop on two ranks: every block has both ranks as contributors.
    stats = [BlockNoise(**entry) for entry in reports[0]]
    assert [s.block for s in stats] == [1, 2, 3, 4]
    for entry in stats:
        assert entry.observations == 12 and entry.contributors == 2 and entry.batch == 8
        assert math.isfinite(entry.grad_sqr) and entry.grad_var > 0.0


def test_lease_summary_carries_block_noise_beside_the_existing_figures() -> None:
    noise = (BlockNoise(1, 0.5, 2.0, 8, 10, 9, 4),)
    report = lease_report(
        end_iteration=10,
        plan=SPBPlan((0, 1), 2),
        num_blocks=2,
        losses=(1.0,),
        samples=80,
        block_noise=noise,
        probe_iterations=1,
    )
    outcome = summarize([report])
    assert outcome.block_noise == noise and outcome.probe_iterations == 1
    metrics = outcome.as_metrics()
    assert metrics["block_noise"] == [noise[0].as_dict()]
    assert metrics["probe_iterations"] == 1
    assert metrics["bytes_sent"] == [1]


def test_char_lstm_entrypoint_trains_under_spb_with_identical_replicas() -> None:
    config = TrainerConfig(
        model="worker.zoo.examples.char_lstm:build",
        plan=model_plan("staircase", WORLD, "worker.zoo.examples.char_lstm:build"),
        batch_size=2,
        optimizer="adamw",
        lr=3e-3,
        seed=1,
    )
    trainers = _run(config, 2)
    assert trainers[0].num_blocks == 4
    assert trainers[0].history[-1].loss < 5.6  # below ln(256), uniform over bytes, after 2 steps
    vectors = [t.state_vector() for t in trainers]
    assert all(torch.equal(vectors[0], v) for v in vectors[1:])
    assert [s.block for s in trainers[0].noise_stats()] == [2, 3, 4]
