"""Engine behaviour on the in-process (thread) group: fast, no process spawning."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from jigsaw.model.errors import InvalidPlanError, InvalidSpecError
from jigsaw.model.plan import SPBPlan, full_backprop, staircase
from worker.spb.checkpoint import CheckpointError
from worker.spb.collectives import ring_all_reduce_bytes
from worker.spb.model_plans import model_plan
from worker.spb.sampler import GlobalBatchSampler
from worker.spb.thread_collectives import ThreadGroup, run_threads
from worker.spb.trainer import PlanSwitchError, SPBTrainer
from worker.spb.trainer_setup import TrainerConfig

MLP_BLOCKS = 4
MLP = TrainerConfig(model="mlp", plan=staircase(2, MLP_BLOCKS), batch_size=8, lr=0.1)


def _one_step(config: TrainerConfig, world: int) -> list[SPBTrainer]:
    def body(rank: int, collectives: object) -> SPBTrainer:
        trainer = SPBTrainer(config, collectives)  # type: ignore[arg-type]
        trainer.step()
        return trainer

    return run_threads(world, body)


@pytest.mark.parametrize("model", ["resnet18_32", "digits_cnn", "gpt_small"])
def test_saved_activation_bytes_strictly_fall_with_stop_depth(model: str) -> None:
    config = TrainerConfig(
        model=model, plan=model_plan("staircase", 4, model), batch_size=2, lr=0.01
    )
    trainers = _one_step(config, 4)
    saved = [t.history[-1].saved_activation_bytes for t in trainers]
    assert all(a > b > 0 for a, b in itertools.pairwise(saved)), saved


def test_bytes_sent_follow_the_documented_model() -> None:
    trainers = _one_step(TrainerConfig(model="mlp", plan=staircase(4, MLP_BLOCKS), batch_size=8), 4)
    # Each block's buffer carries one extra float32: the gradient-noise statistic (noise.py).
    sizes = [sum(p.numel() * 4 for p in block.parameters()) + 4 for block in trainers[0].blocks]
    s1, s2, s3, s4 = sizes
    expected = [
        ring_all_reduce_bytes(s4, 4)
        + ring_all_reduce_bytes(s3, 3)
        + ring_all_reduce_bytes(s2, 2)
        + 3 * s1,  # rank 0 is the only contributor of block 1 and delivers it to 1, 2, 3
        ring_all_reduce_bytes(s4, 4)
        + ring_all_reduce_bytes(s3, 3)
        + ring_all_reduce_bytes(s2, 2)
        + 2 * s2,
        ring_all_reduce_bytes(s4, 4) + ring_all_reduce_bytes(s3, 3) + s3,
        ring_all_reduce_bytes(s4, 4),
    ]
    got = [t.history[-1].bytes_sent for t in trainers]
    assert got == [round(e) for e in expected]


def test_replicas_are_bit_identical_after_a_step_including_batchnorm_buffers() -> None:
    plan = model_plan("0,2,1,3", 4, "digits_cnn")
    trainers = _one_step(TrainerConfig(model="digits_cnn", plan=plan, batch_size=8), 4)
    vectors = [t.state_vector() for t in trainers]
    assert all(torch.equal(vectors[0], v) for v in vectors[1:])


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        ("1,2,3,3", "leaves block 1 untrained"),
        ("0,1,2,4", "outside the model"),
        ("0,1", "2 depths but the job has 4 workers"),
        ("uniform:x", "needs an integer k"),
        ("sideways", "unknown plan"),
    ],
)
def test_invalid_plans_are_rejected_with_a_clear_message(plan: str, message: str) -> None:
    with pytest.raises(InvalidPlanError, match=message):
        model_plan(plan, 4, "mlp")


def test_the_trainer_refuses_a_plan_for_another_world_size_or_block_count() -> None:
    group = ThreadGroup(4)
    for plan, shape in ((staircase(2, 4), "2 workers x 4 blocks"), (staircase(4, 5), "4 x 5")):
        with pytest.raises(InvalidSpecError, match=shape.replace(" x 5", " workers x 5 blocks")):
            SPBTrainer(TrainerConfig(model="mlp", plan=plan), group.collectives(0))


def test_plan_switch_for_a_past_iteration_is_refused() -> None:
    def body(rank: int, collectives: object) -> None:
        trainer = SPBTrainer(MLP, collectives)  # type: ignore[arg-type]
        trainer.run(2)
        with pytest.raises(PlanSwitchError, match="already at iteration 2"):
            trainer.schedule_plan(full_backprop(2, MLP_BLOCKS), apply_at=1)
        with pytest.raises(InvalidSpecError, match="plan is for 2 workers x 6 blocks"):
            trainer.schedule_plan(SPBPlan((0, 5), 6), apply_at=4)

    run_threads(2, body)


def test_incomplete_checkpoint_is_refused(tmp_path: Path) -> None:
    config = replace(MLP, plan=staircase(1, MLP_BLOCKS))
    trainer = SPBTrainer(config, ThreadGroup(1).collectives(0))
    trainer.save_checkpoint(tmp_path / "ok")
    (tmp_path / "ok" / "meta.json").unlink()
    with pytest.raises(CheckpointError, match="not a complete checkpoint"):
        trainer.load_checkpoint(tmp_path / "ok")


def test_sampler_shards_are_disjoint_and_resume_from_a_saved_position() -> None:
    samplers = [GlobalBatchSampler(100, 8, 4, seed=5) for _ in range(4)]
    for _ in range(7):  # crosses an epoch boundary (3 global batches per epoch)
        shards = [s.next_indices(r) for r, s in enumerate(samplers)]
        assert len(torch.cat(shards).unique()) == 32
    resumed = GlobalBatchSampler(100, 8, 4, seed=5)
    resumed.load_state_dict(samplers[2].state_dict())
    assert torch.equal(resumed.next_indices(2), samplers[2].next_indices(2))
    with pytest.raises(InvalidSpecError, match="exceeds the 10 training samples"):
        GlobalBatchSampler(10, 8, 4, seed=0)


def test_trainer_learns_digits_with_a_staircase_plan() -> None:
    config = TrainerConfig(model="mlp", plan=staircase(4, MLP_BLOCKS), batch_size=32, lr=0.1)

    def body(rank: int, collectives: object) -> float:
        trainer = SPBTrainer(config, collectives)  # type: ignore[arg-type]
        trainer.run(60)
        return trainer.evaluate()

    accuracies = run_threads(4, body)
    assert accuracies[0] > 0.85 and len(set(accuracies)) == 1
