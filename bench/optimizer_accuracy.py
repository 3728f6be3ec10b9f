"""Held-out digits accuracy of SGD and AdamW at a few learning rates: what docs/API.md's
optimizer table shows (the job default learning rate, 0.05, is an SGD rate).

One process, full backprop, global batch 64, 200 iterations, seed 0: the unmodified
``SPBTrainer`` with ``TrainerConfig(optimizer=..., lr=...)`` on one thread rank.

    python -m bench.optimizer_accuracy -o json
"""

from __future__ import annotations

import argparse
from typing import Any

from bench.spb_common import emit, provenance
from jigsaw.model.plan import full_backprop
from worker.spb import SPBTrainer, TrainerConfig
from worker.spb.thread_collectives import ThreadGroup

SETTINGS = (("sgd", 0.05), ("adamw", 0.05), ("adamw", 0.003), ("adamw", 0.001))
BLOCKS = {"mlp": 4, "digits_cnn": 4}


def accuracy(model: str, optimizer: str, lr: float, iterations: int, seed: int) -> float:
    config = TrainerConfig(
        model=model,
        plan=full_backprop(1, BLOCKS[model]),
        batch_size=64,
        lr=lr,
        optimizer=optimizer,  # type: ignore[arg-type]
        seed=seed,
    )
    trainer = SPBTrainer(config, ThreadGroup(1).collectives(0))
    trainer.run(iterations)
    return trainer.evaluate()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-o", "--output", choices=("json", "text"), default="text")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = [
        {
            "model": model,
            "optimizer": optimizer,
            "lr": lr,
            "accuracy": round(accuracy(model, optimizer, lr, args.iterations, args.seed), 3),
        }
        for model in BLOCKS
        for optimizer, lr in SETTINGS
    ]
    lines = [f"{r['model']:>10} {r['optimizer']:<5} lr {r['lr']:<6} {r['accuracy']}" for r in rows]
    emit({"provenance": provenance(), "rows": rows}, args.output, lines)


if __name__ == "__main__":
    main()
