"""The η benchmark's training runs: the settings (model, data, optimizer, length) and one
4-worker run of a setting under an SPB plan, its loss curve and per-block noise statistics,
saved to the run cache as it finishes (``bench/spb_efficiency.py``; also trained by
``bench/batch_efficiency.py`` and ``bench/spb_adam_noise.py``)."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from jigsaw.efficiency.lr_scaling import scaled_learning_rate
from worker.spb.model_plans import model_plan
from worker.spb.thread_collectives import run_threads
from worker.spb.trainer import SPBTrainer
from worker.spb.trainer_setup import TrainerConfig
from worker.zoo import load_workload

WORKERS = 4
PLANS = ("none", "staircase", "uniform:1", "uniform:3")
RESULTS = Path(__file__).parent / "results"
RUN_CACHE = RESULTS / "spb_efficiency_runs"


@dataclass(frozen=True)
class Setting:
    model: str
    label: str
    dataset: str
    iterations: int
    eval_every: int
    batch_size: int
    optimizer: str
    lr: float
    loss_samples: int
    spb_factor: float = 1.5
    """SPB runs train this many times longer than full backprop, so that they can reach the
    loss full backprop reached at the end of its run (eta down to 1/spb_factor is measurable
    at every checkpoint)."""

    def length(self, plan: str) -> int:
        return self.iterations if plan == "none" else round(self.iterations * self.spb_factor)

    def run_key(self, plan: str) -> dict[str, Any]:
        """What a saved run depends on: everything but the other plans' length."""
        key = {k: v for k, v in asdict(self).items() if k not in ("iterations", "spb_factor")}
        return {**key, "run_iterations": self.length(plan)}


SETTINGS = (
    Setting("mlp", "mlp", "sklearn-digits", 600, 20, 32, "sgd", 0.05, 1437),
    Setting(
        "worker.zoo.examples.char_lstm:build",
        "char_lstm",
        "pydoc-topics-text",
        400,
        20,
        8,
        "adamw",
        3e-3,
        128,
    ),
    Setting("digits_cnn", "digits_cnn", "sklearn-digits", 150, 10, 32, "sgd", 0.05, 1437),
    Setting("gpt_small", "gpt_small", "pydoc-topics-text", 120, 10, 8, "adamw", 3e-3, 128),
)
"""Cheapest first: every run is saved as it finishes, so a partial run still gives whole
models."""


def _loss_subset(train: Any, samples: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A fixed, evenly spread subset of the training set (the same for every run)."""
    indices = torch.linspace(0, len(train) - 1, min(samples, len(train))).long()
    inputs, targets = train.fetch(indices)
    return inputs, targets


@torch.no_grad()
def training_loss(trainer: SPBTrainer, inputs: torch.Tensor, targets: torch.Tensor) -> float:
    for block in trainer.blocks:
        block.eval()
    try:
        total = 0.0
        for start in range(0, len(targets), 256):
            out = trainer.workload.forward(inputs[start : start + 256])
            total += float(trainer.workload.loss(out, targets[start : start + 256])) * len(
                targets[start : start + 256]
            )
        return total / len(targets)
    finally:
        for block in trainer.blocks:
            block.train()


def train_curve(
    setting: Setting, plan: str, seed: int, batch_factor: float = 1.0, length: int | None = None
) -> dict[str, Any]:
    """One 4-worker run: the loss curve and rank 0's smoothed per-block noise statistics at
    every evaluation point.

    ``batch_factor`` scales the global batch (``bench/batch_efficiency.py``); the learning rate
    then follows the runtime's rule (:func:`jigsaw.efficiency.lr_scaling.scaled_learning_rate`:
    AdaScale
    for SGD, from the run's own statistics, re-applied before every iteration; the
    square-root rule for AdamW). ``length``: iterations (default ``setting.length(plan)``)."""
    torch.set_num_threads(1)
    batch = round(setting.batch_size * batch_factor)
    length = setting.length(plan) if length is None else length
    config = TrainerConfig(
        model=setting.model,
        plan=model_plan(plan, WORKERS, setting.model),
        batch_size=batch,
        optimizer="adamw" if setting.optimizer == "adamw" else "sgd",
        lr=setting.lr,
        momentum=0.9,
        seed=seed,
        measure_activations=False,
    )
    data = load_workload(setting.model).make_data()
    inputs, targets = _loss_subset(data.train, setting.loss_samples)
    started = time.perf_counter()

    def body(rank: int, collectives: Any) -> dict[str, Any]:
        trainer = SPBTrainer(config, collectives, data=data)
        curve: list[tuple[int, float]] = []
        stats: list[tuple[int, list[dict[str, Any]]]] = []
        rates: list[tuple[int, float]] = []
        while True:
            if batch != setting.batch_size:
                rate = scaled_learning_rate(
                    setting.lr,
                    WORKERS * setting.batch_size,
                    WORKERS * batch,
                    config.optimizer,
                    trainer.noise_stats(),
                )
                for group in trainer.optimizer.param_groups:
                    group["lr"] = rate
            if rank == 0 and trainer.iteration % setting.eval_every == 0:
                curve.append((trainer.iteration, training_loss(trainer, inputs, targets)))
                stats.append((trainer.iteration, [s.as_dict() for s in trainer.noise_stats()]))
                rates.append((trainer.iteration, trainer.optimizer.param_groups[0]["lr"]))
            if trainer.iteration == length:
                result = {"curve": curve, "stats": stats, "blocks": trainer.num_blocks}
                if batch != setting.batch_size:
                    result["learning_rates"] = rates
                return {**result, "state_norm": float(trainer.state_vector().norm())}
            trainer.step()

    results = run_threads(WORKERS, body)
    if len({r["state_norm"] for r in results}) != 1:
        raise RuntimeError(f"replicas diverged: {[r['state_norm'] for r in results]}")
    result = {k: v for k, v in results[0].items() if k != "state_norm"}
    return {
        "model": setting.label,
        "plan": plan,
        "seed": seed,
        **({"batch_factor": batch_factor} if batch != setting.batch_size else {}),
        **result,
        "wall_s": time.perf_counter() - started,
    }


def cached_run(setting: Setting, plan: str, seed: int) -> dict[str, Any]:
    """``train_curve``, saved under ``RUN_CACHE`` as soon as it finishes and reused if the same
    setting was already run (so an interrupted benchmark resumes)."""
    path = RUN_CACHE / f"{setting.label}-{plan.replace(':', '_')}-{seed}.json"
    if path.is_file():
        saved = json.loads(path.read_text())
        if saved.get("setting") == setting.run_key(plan):
            return dict(saved["run"])
    run = train_curve(setting, plan, seed)
    RUN_CACHE.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"setting": setting.run_key(plan), "run": run}) + "\n")
    return run
