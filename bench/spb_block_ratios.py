"""Each block's share of a model's gradient noise, measured with the engine's own statistics.

Pollux's validation curves give whole-model ``grad_sqr`` and ``grad_var`` over training. The
simulator's eta needs them per block; this benchmark measures each block's share on the zoo
model that stands in for each Pollux application (jigsaw/simulator/eta_curves.py) and writes
them to ``jigsaw/data/block_noise_ratios.json``.

How: a 4-worker full-backprop run of the unmodified SPBTrainer (4 threads joined by the
in-process collectives, as bench/spb_efficiency.py) on the model's real data (sklearn digits,
or Python's pydoc topics text for the language models). After a warm-up, every ``every``
iterations the engine's smoothed per-block statistics (worker/spb/noise.py) are read; at each
read the block's share of the sum over blocks is taken, for grad_sqr and for grad_var, and the
shares are averaged over the reads (and renormalised to sum to 1). The spread (min and max of
each share over the reads) is kept too, so a reader can see how constant the split is.

    python -m bench.spb_block_ratios -o json          # measure, write the file
    python -m bench.spb_block_ratios --only cifar10   # one application
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from bench.spb_common import emit, provenance
from worker.spb.model_plans import model_plan
from worker.spb.thread_collectives import run_threads
from worker.spb.trainer import SPBTrainer
from worker.spb.trainer_setup import TrainerConfig
from worker.zoo import load_workload

WORKERS = 4
OUTPUT = Path(__file__).resolve().parent.parent / "jigsaw" / "data" / "block_noise_ratios.json"


@dataclass(frozen=True)
class StandIn:
    app: str
    model: str
    dataset: str
    why: str
    iterations: int
    warmup: int
    every: int
    batch_size: int
    optimizer: str
    lr: float


STAND_INS = (
    StandIn(
        "ncf",
        "mlp",
        "sklearn-digits",
        "NCF is embeddings + an MLP; the zoo's MLP is the closest dense network",
        240,
        40,
        10,
        32,
        "sgd",
        0.05,
    ),
    StandIn(
        "yolov3",
        "digits_cnn",
        "sklearn-digits",
        "YOLOv3 is a convolutional detector; digits_cnn is the conv net cheap enough on "
        "CPU (resnet18_32 already stands in for cifar10)",
        240,
        40,
        10,
        32,
        "sgd",
        0.05,
    ),
    StandIn(
        "cifar10",
        "resnet18_32",
        "sklearn-digits",
        "Pollux's cifar10 application trains ResNet-18 on 32x32 images",
        60,
        20,
        5,
        16,
        "sgd",
        0.05,
    ),
    StandIn(
        "imagenet",
        "resnet18_32",
        "sklearn-digits",
        "ImageNet trains ResNet-50; resnet50_32 is too slow on the 2 shared CPU cores, so "
        "the ResNet-18 split is used (same 4-stage residual layout)",
        0,
        0,
        0,
        16,
        "sgd",
        0.05,
    ),
    StandIn(
        "bert",
        "gpt_small",
        "pydoc-topics-text",
        "BERT is a transformer; gpt_small is the zoo's transformer",
        100,
        20,
        5,
        8,
        "adamw",
        3e-3,
    ),
    StandIn(
        "deepspeech2",
        "worker.zoo.examples.char_lstm:build",
        "pydoc-topics-text",
        "DeepSpeech2 is a recurrent network; char_lstm is the zoo's RNN",
        200,
        40,
        10,
        8,
        "adamw",
        3e-3,
    ),
)
"""``iterations == 0``: the app reuses the ratios measured for the same model above."""


def measure(stand_in: StandIn, seed: int = 0) -> dict[str, Any]:
    torch.set_num_threads(1)
    config = TrainerConfig(
        model=stand_in.model,
        plan=model_plan("none", WORKERS, stand_in.model),
        batch_size=stand_in.batch_size,
        optimizer="adamw" if stand_in.optimizer == "adamw" else "sgd",
        lr=stand_in.lr,
        momentum=0.9,
        seed=seed,
        measure_activations=False,
    )
    data = load_workload(stand_in.model).make_data()
    started = time.perf_counter()

    def body(rank: int, collectives: Any) -> list[list[tuple[float, float]]]:
        trainer = SPBTrainer(config, collectives, data=data)
        reads: list[list[tuple[float, float]]] = []
        while trainer.iteration < stand_in.iterations:
            trainer.step()
            if (
                rank == 0
                and trainer.iteration >= stand_in.warmup
                and trainer.iteration % stand_in.every == 0
            ):
                stats = sorted(trainer.noise_stats(), key=lambda s: s.block)
                reads.append([(s.grad_sqr, s.grad_var) for s in stats])
        return reads

    reads = run_threads(WORKERS, body)[0]
    sqr_shares = [_shares([r[0] for r in read]) for read in reads]
    var_shares = [_shares([r[1] for r in read]) for read in reads]
    return {
        "model": stand_in.model,
        "dataset": stand_in.dataset,
        "why": stand_in.why,
        "grad_sqr": _mean_shares(sqr_shares),
        "grad_var": _mean_shares(var_shares),
        "grad_sqr_range": _ranges(sqr_shares),
        "grad_var_range": _ranges(var_shares),
        "reads": len(reads),
        "iterations": stand_in.iterations,
        "warmup": stand_in.warmup,
        "every": stand_in.every,
        "batch_size": stand_in.batch_size,
        "workers": WORKERS,
        "optimizer": stand_in.optimizer,
        "lr": stand_in.lr,
        "wall_s": round(time.perf_counter() - started, 1),
    }


def _shares(values: list[float]) -> list[float]:
    clipped = [max(0.0, v) for v in values]
    total = sum(clipped)
    return [v / total for v in clipped] if total > 0 else [1.0 / len(values)] * len(values)


def _mean_shares(shares: list[list[float]]) -> list[float]:
    means = [sum(column) / len(column) for column in zip(*shares, strict=True)]
    total = sum(means)
    return [round(m / total, 6) for m in means]


def _ranges(shares: list[list[float]]) -> list[list[float]]:
    return [[round(min(c), 4), round(max(c), 4)] for c in zip(*shares, strict=True)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-o", "--output", choices=("json", "text"), default="text")
    parser.add_argument("--only", action="append", help="measure only this application")
    parser.add_argument("--write", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    existing = json.loads(args.write.read_text())["apps"] if args.write.is_file() else {}
    apps: dict[str, Any] = dict(existing)
    by_model: dict[str, dict[str, Any]] = {}
    for stand_in in STAND_INS:
        if args.only and stand_in.app not in args.only:
            continue
        if stand_in.iterations == 0:
            source = by_model.get(stand_in.model) or next(
                (a for a in apps.values() if a["model"] == stand_in.model), None
            )
            if source is None:
                continue
            apps[stand_in.app] = {
                **source,
                "why": stand_in.why,
                "reused_from": "measurement of the same model",
            }
        else:
            apps[stand_in.app] = by_model[stand_in.model] = measure(stand_in)
        print(
            f"{stand_in.app}: {apps[stand_in.app]['grad_sqr']} {apps[stand_in.app]['grad_var']}",
            file=sys.stderr,
        )
    result: dict[str, Any] = {
        "what": "each block's share of the whole model's grad_sqr and grad_var, per Pollux "
        "application, measured on a zoo stand-in; taken as constant over training",
        "how": "bench/spb_block_ratios.py: 4-worker full-backprop SPBTrainer run (in-process "
        "collectives) on real data; the engine's smoothed per-block statistics read "
        "every `every` iterations after `warmup`; shares averaged over the reads",
        "provenance": provenance(),
        "apps": dict(sorted(apps.items())),
    }
    args.write.write_text(json.dumps(result, indent=2) + "\n")
    lines = [f"{app}: sqr {a['grad_sqr']} var {a['grad_var']}" for app, a in result["apps"].items()]
    emit(result, args.output, lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
