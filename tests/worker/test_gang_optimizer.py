"""A gang's optimizer comes from its config (``GangConfig.optimizer``, the job's ``optimizer``):
real digits training on thread-simulated ranks, no Ray.

- ``adamw`` trains with ``torch.optim.AdamW``, and a 2-rank gang ends with the weights of one
  process running AdamW on the same global batches (and not those of SGD).
- Adam's moments and step count survive a checkpoint, also into a gang of another size, where
  an adaptive batch's learning rate follows the square-root rule (SGD: AdaScale).
- The engines that only train with SGD (pipeline, hybrid) refuse ``adamw`` naming the field,
  and AdamW refuses a momentum (it has betas).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch

from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.parallelism import HybridPlan, PipelinePlan
from jigsaw.model.plan import full_backprop
from tests.worker.gang_configs import gang_config
from worker.runtime.gang_worker import build_lease_trainer
from worker.runtime.messages import GangConfig
from worker.spb import SPBTrainer, TrainerConfig
from worker.spb.sampler import GlobalBatchSampler
from worker.spb.thread_collectives import ThreadGroup, run_threads

BLOCKS = 4  # mlp
ADAMW_LR = 3e-3


def adamw_gang(tmp_path: Path, workers: int = 2, **changes: Any) -> GangConfig:
    values: dict[str, Any] = {
        "batch_size": 16,
        "learning_rate": ADAMW_LR,
        "optimizer": "adamw",
        **changes,
    }
    return gang_config(full_backprop(workers, BLOCKS), tmp_path, **values)


def train(config: GangConfig, iterations: int, save: Path | None = None) -> list[dict[str, Any]]:
    def body(rank: int, comm: Any) -> dict[str, Any]:
        lease = build_lease_trainer(config, comm, "cpu")
        if config.restore_from is not None:
            lease.load_checkpoint(Path(config.restore_from))
        engine: SPBTrainer = lease.trainer  # type: ignore[attr-defined]
        restored = _adam_state(engine)
        losses = lease.run(iterations, lambda _: None).losses
        if save is not None:
            lease.save_checkpoint(save)
        return {
            "optimizer": engine.optimizer,
            "restored": restored,
            "lr": engine.optimizer.param_groups[0]["lr"],
            "losses": losses,
            "weights": [p.detach().clone() for p in engine.params],
            "accuracy": lease.evaluate(None),
        }

    return run_threads(config.world_size, body)


def _adam_state(engine: SPBTrainer) -> dict[str, Any] | None:
    state = engine.optimizer.state.get(engine.params[0])
    if not state:
        return None
    return {"step": float(state["step"]), "exp_avg_sq": state["exp_avg_sq"].clone()}


def one_process(optimizer: str, lr: float, iterations: int) -> list[torch.Tensor]:
    """The same model, seed and global batches (32 samples) in one process."""
    trainer = SPBTrainer(
        TrainerConfig(
            model="mlp",
            plan=full_backprop(1, BLOCKS),
            batch_size=32,
            optimizer="adamw" if optimizer == "adamw" else "sgd",
            lr=lr,
            seed=3,
        ),
        ThreadGroup(1).collectives(0),
    )
    trainer.run(iterations)
    return [p.detach().clone() for p in trainer.params]


def largest_difference(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    return max(float((x - y).abs().max()) for x, y in zip(a, b, strict=True))


def test_an_adamw_gang_trains_digits_with_torch_adamw(tmp_path: Path) -> None:
    results = train(adamw_gang(tmp_path), 60)
    assert all(type(r["optimizer"]) is torch.optim.AdamW for r in results)
    losses = results[0]["losses"]
    assert sum(losses[-10:]) / 10 < 0.5 * sum(losses[:10]) / 10, losses
    assert results[0]["accuracy"] > 0.8  # held-out digits after 60 steps of 32 samples
    got = results[0]["weights"]
    assert largest_difference(got, results[1]["weights"]) == 0.0  # replicas identical
    assert largest_difference(got, one_process("adamw", ADAMW_LR, 60)) < 1e-5
    assert largest_difference(got, one_process("sgd", ADAMW_LR, 60)) > 1e-3


def test_a_gang_without_an_optimizer_trains_with_sgd_as_before(tmp_path: Path) -> None:
    config = gang_config(full_backprop(2, BLOCKS), tmp_path, batch_size=16)
    assert config.optimizer == "sgd"
    results = train(config, 5)
    assert type(results[0]["optimizer"]) is torch.optim.SGD
    assert results[0]["optimizer"].param_groups[0]["momentum"] == 0.9


def test_adams_moments_survive_a_checkpoint_and_a_resize(tmp_path: Path) -> None:
    straight = train(adamw_gang(tmp_path), 8)
    saved = tmp_path / "it-4"
    train(adamw_gang(tmp_path), 4, save=saved)
    resumed = train(adamw_gang(tmp_path, restore_from=str(saved)), 4)
    assert resumed[0]["restored"] is not None and resumed[0]["restored"]["step"] == 4
    assert resumed[0]["losses"] == straight[0]["losses"][4:]
    assert largest_difference(resumed[0]["weights"], straight[0]["weights"]) == 0.0

    # The same checkpoint in a gang of 4 workers: an adaptive job tuned at global batch 32
    # now runs 64, so AdamW's rate is sqrt(2) times the tuned one, its moments kept.
    grown = train(adamw_gang(tmp_path, workers=4, restore_from=str(saved), base_global_batch=32), 2)
    restored = grown[0]["restored"]
    assert restored is not None and restored["step"] == 4
    assert torch.equal(restored["exp_avg_sq"], resumed[0]["restored"]["exp_avg_sq"])
    assert grown[0]["lr"] == pytest.approx(ADAMW_LR * math.sqrt(2))


def test_an_adaptive_adamw_run_resized_2_4_3_equals_one_process_with_its_batches_and_rates(
    tmp_path: Path,
) -> None:
    """Global batch 24 (2 workers) -> 48 (4) -> 24 (3), each gang restoring the previous one's
    checkpoint: the rates follow the square-root rule, and one process that applies the same
    batches and rates at the same iterations ends with the same weights (Adam's moments and
    step count carried through both resizes, no sample skipped or seen twice)."""
    phases = [(2, 12, 15), (4, 12, 15), (3, 8, 15)]  # workers, batch per worker, iterations
    rates: list[float] = []
    restore: str | None = None
    for index, (workers, batch, iterations) in enumerate(phases):
        saved = tmp_path / f"phase-{index}"
        config = adamw_gang(
            tmp_path, workers, batch_size=batch, base_global_batch=24, restore_from=restore
        )
        results = train(config, iterations, save=saved)
        rates.append(results[0]["lr"])
        restore = str(saved)
    assert rates == pytest.approx([ADAMW_LR, ADAMW_LR * math.sqrt(2), ADAMW_LR])

    reference = SPBTrainer(
        TrainerConfig(
            model="mlp",
            plan=full_backprop(1, BLOCKS),
            batch_size=24,
            optimizer="adamw",
            lr=ADAMW_LR,
            seed=3,
        ),
        ThreadGroup(1).collectives(0),
    )
    for (workers, batch, iterations), rate in zip(phases, rates, strict=True):
        position = reference.sampler.state_dict()
        reference.sampler = GlobalBatchSampler(len(reference.data.train), workers * batch, 1, 3)
        reference.sampler.load_state_dict(position)
        for group in reference.optimizer.param_groups:
            group["lr"] = rate
        reference.run(iterations)
    want = [p.detach().clone() for p in reference.params]
    assert largest_difference(results[0]["weights"], want) < 1e-5


def test_the_adaptive_rate_rule_follows_the_optimizer(tmp_path: Path) -> None:
    """At twice the tuned global batch: AdamW sqrt(2) x; SGD by AdaScale, which without the
    job's gradient statistics yet (a fresh gang) keeps the tuned rate."""
    for optimizer, want in (("adamw", 0.01 * math.sqrt(2)), ("sgd", 0.01)):
        config = adamw_gang(tmp_path, optimizer=optimizer, learning_rate=0.01, base_global_batch=16)
        assert train(config, 1)[0]["lr"] == pytest.approx(want), optimizer


@pytest.mark.parametrize(
    "plan",
    [
        PipelinePlan.for_workers(num_blocks=4, num_workers=2, replicas=1, micro_batches=2),
        HybridPlan.suffix(num_blocks=4, num_workers=2, first_sharded=2),
    ],
    ids=["pipeline", "hybrid"],
)
def test_engines_that_train_with_sgd_only_refuse_adamw_naming_the_field(
    tmp_path: Path, plan: PipelinePlan | HybridPlan
) -> None:
    config = gang_config(plan, tmp_path, optimizer="adamw")
    with pytest.raises(InvalidSpecError, match="data parallel only") as refused:
        build_lease_trainer(config, ThreadGroup(2).collectives(0), "cpu")
    assert refused.value.field == "optimizer"


def test_an_unknown_optimizer_and_adamw_with_a_momentum_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidSpecError, match="sgd, adamw") as unknown:
        build_lease_trainer(
            adamw_gang(tmp_path, workers=1, optimizer="lamb"), ThreadGroup(1).collectives(0), "cpu"
        )
    assert unknown.value.field == "optimizer"
    config = TrainerConfig(
        model="mlp", plan=full_backprop(1, BLOCKS), optimizer="adamw", momentum=0.5
    )
    with pytest.raises(InvalidSpecError, match="betas") as momentum:
        SPBTrainer(config, ThreadGroup(1).collectives(0))
    assert momentum.value.field == "momentum"
