"""Statistical efficiency of a PipeDream-2BW pipeline (one-step weight delay) against
data-parallel SGD, measured the way SPB's eta is measured (bench/spb_efficiency.py).

Each run trains a job of 2 workers x 32 (global batch 64) with torch.optim.SGD (lr, momentum,
no weight decay) in one process, with the gradient of the global batch's mean loss taken at
W(t) (``delay 0``: data parallelism, also GPipe and the hybrid) or at W(t-1) (``delay 1``:
the 2BW rule W(t+1) = W(t) - lr SGD-momentum(grad f(W(t-1)))). The single-process delay-1
rule stands in for the pipeline engine for speed: tests/runtime/test_lease_trainers.py pins
the 2BW engine (through the gang's lease seam) equal to it on ``mlp``, and
docs/BENCHMARKS.md ("Pipeline vs data parallelism on one job") shows the two reach the same
held-out accuracy over 10 seeds. The global batch is taken as 2 chunks of 32, each with its
own forward (the data-parallel workers' batches, and the planner's 2 micro-batches of the
2-stage pipeline): ``digits_cnn``'s BatchNorm sees the batch statistics the engines see.

Measured eta at checkpoint f (25/50/75/100% of the delay-0 run of T iterations): L_f is the
training loss (the whole training split, eval mode) the delay-0 run reached at f*T;
eta(f) = n_0(L_f) / n_1(L_f), n_x(L) the first (interpolated) iteration at which run x's loss
is <= L. The delay-1 run trains DELAY_FACTOR x T iterations; one that never gets there is
scored at its last iteration (an upper bound, ``reached: false``).

    python -m bench.pipeline_efficiency -o json            # train, analyse
    python -m bench.pipeline_efficiency --analyse -o json  # saved curves
    python -m bench.pipeline_efficiency --fit -o json      # fit + held-out
    python -m bench.pipeline_efficiency --check-engine 50  # engine = rule?

``--fit`` fits the model (jigsaw/efficiency/pipeline.py: η = 1 / (1 + (h lr / (1 - μ))²)) on
the lr 0.01 and 0.05 columns, one h per model and (ablation) one h for both, and scores it on
the held-out lr 0.02 column (and on every case, for reference).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any, cast

import torch
from torch import nn
from torch.func import functional_call

from bench.pipeline_efficiency_fit import fit_and_score, text_lines
from bench.spb_common import emit, iterations_to, provenance
from bench.spb_efficiency_scoring import CHECKPOINTS
from jigsaw.model.parallelism import PipelinePlan
from worker.pipeline import PipelineConfig, PipelineTrainer
from worker.spb.sampler import GlobalBatchSampler
from worker.spb.thread_collectives import run_threads
from worker.zoo import load_workload

WORKERS = 2
BATCH = 32
DELAY_FACTOR = 4
LRS = (0.01, 0.02, 0.05)
MOMENTA = (0.0, 0.5, 0.9)
RESULTS_FILE = Path(__file__).parent / "results" / "pipeline_efficiency.json"


@dataclass(frozen=True)
class Setting:
    model: str
    iterations: int
    eval_every: int


SETTINGS = (Setting("mlp", 300, 10), Setting("digits_cnn", 100, 5))


@torch.no_grad()
def training_loss(net: nn.Module, loss: Any, inputs: torch.Tensor, targets: torch.Tensor) -> float:
    net.eval()
    try:
        return float(loss(net(inputs), targets))
    finally:
        net.train()


class DelayedSGD:
    """The update rule in one process: torch.optim.SGD on the whole model, the global batch
    in WORKERS chunks of BATCH, the gradient taken at W(t - delay)."""

    def __init__(self, model: str, lr: float, momentum: float, delay: int, seed: int) -> None:
        self.workload = load_workload(model, seed=seed)
        self.net = nn.Sequential(*self.workload.blocks)
        self.names = [n for n, _ in self.net.named_parameters()]
        self.params = list(self.net.parameters())
        self.optimizer = torch.optim.SGD(self.params, lr=lr, momentum=momentum)
        self.data = self.workload.make_data().train
        # One global batch per iteration (the engines' order: a sampler advances a whole
        # global batch per next_indices call), in WORKERS chunks of BATCH.
        self.sampler = GlobalBatchSampler(len(self.data), BATCH * WORKERS, 1, seed)
        self.delay = delay
        self.previous = [p.detach().clone() for p in self.params]

    def step(self) -> None:
        indices = self.sampler.next_indices(0).chunk(WORKERS)
        chunks = [self.data.fetch(part) for part in indices]
        at = self.previous if self.delay else [p.detach().clone() for p in self.params]
        leaves = [w.detach().requires_grad_(True) for w in at]
        weights = dict(zip(self.names, leaves, strict=True))
        loss = self.workload.loss
        # Summed left to right as before (the saved curves depend on the float order).
        total = cast(
            torch.Tensor, sum(loss(functional_call(self.net, weights, (x,)), y) for x, y in chunks)
        )
        grads = torch.autograd.grad(total / WORKERS, leaves)
        self.previous = [p.detach().clone() for p in self.params]
        for p, g in zip(self.params, grads, strict=True):
            p.grad = g
        self.optimizer.step()

    def weights(self) -> dict[str, torch.Tensor]:
        return {n: p.detach().clone() for n, p in zip(self.names, self.params, strict=True)}


def train_curve(
    setting: Setting,
    lr: float,
    momentum: float,
    delay: int,
    seed: int,
    stop_at_loss: float | None = None,
) -> dict[str, Any]:
    """One run's training-loss curve, every ``eval_every`` iterations; a delay-1 run trains
    up to ``DELAY_FACTOR`` x T iterations, and stops once its loss is <= ``stop_at_loss``
    (every target reached: the rest of the curve is never read)."""
    torch.set_num_threads(1)
    started = time.perf_counter()
    rule = DelayedSGD(setting.model, lr, momentum, delay, seed)
    all_inputs, all_targets = rule.data.fetch(torch.arange(len(rule.data)))
    length = setting.iterations * (DELAY_FACTOR if delay else 1)
    curve: list[tuple[int, float]] = []
    for iteration in range(length + 1):
        if iteration % setting.eval_every == 0:
            value = training_loss(rule.net, rule.workload.loss, all_inputs, all_targets)
            curve.append((iteration, round(value, 5) if math.isfinite(value) else float("inf")))
            if not math.isfinite(value):
                break  # diverged: no later point can reach a target
            if stop_at_loss is not None and value <= stop_at_loss:
                break
        if iteration == length:
            break
        rule.step()
    return {
        "model": setting.model,
        "lr": lr,
        "momentum": momentum,
        "delay": delay,
        "seed": seed,
        "curve": curve,
        "wall_s": round(time.perf_counter() - started, 2),
    }


def check_engine(model: str, lr: float, momentum: float, iterations: int) -> dict[str, Any]:
    """The 2BW engine (PipelineTrainer: the planner's 2 stages x 1 replica, 2 micro-batches,
    2 thread ranks) against this bench's delay-1 and delay-0 rules after ``iterations``:
    the largest absolute weight difference. ~1e-6 to the delay-1 rule means the bench's runs
    are the engine's."""
    torch.set_num_threads(1)
    plan = PipelinePlan.for_workers(num_blocks=4, num_workers=2, replicas=1, micro_batches=2)
    config = PipelineConfig(
        model=model, plan=plan, batch_size=BATCH * WORKERS, lr=lr, momentum=momentum, seed=0
    )

    def body(_rank: int, collectives: Any) -> dict[str, torch.Tensor]:
        trainer = PipelineTrainer(config, collectives)
        trainer.train(iterations)
        return trainer.named_weights()

    engine: dict[str, torch.Tensor] = {}
    for part in run_threads(2, body):
        engine.update(part)
    out: dict[str, Any] = {"model": model, "lr": lr, "momentum": momentum, "iterations": iterations}
    for delay in (1, 0):
        rule = DelayedSGD(model, lr, momentum, delay, 0)
        for _ in range(iterations):
            rule.step()
        want = rule.weights()
        out[f"max_abs_engine_minus_delay{delay}_rule"] = max(
            (engine[n] - w).abs().max().item() for n, w in want.items()
        )
    return out


def checkpoint_targets(setting: Setting, curve: list[Any]) -> list[tuple[int, float]]:
    """(iteration, loss) of the delay-0 curve nearest each checkpoint fraction of T."""
    return [
        min(curve, key=lambda p: abs(p[0] - fraction * setting.iterations))
        for fraction in CHECKPOINTS
    ]


def train_pair(job: tuple[Setting, float, float, int]) -> list[dict[str, Any]]:
    """The delay-0 run, then the delay-1 run until it reaches every checkpoint's loss."""
    setting, lr, momentum, seed = job
    data = train_curve(setting, lr, momentum, 0, seed)
    lowest = min(loss for _, loss in checkpoint_targets(setting, data["curve"]))
    return [data, train_curve(setting, lr, momentum, 1, seed, stop_at_loss=lowest)]


def measure(settings: list[Setting], seeds: list[int], processes: int) -> list[dict[str, Any]]:
    jobs = [
        (setting, lr, momentum, seed)
        for setting in reversed(settings)  # the slow model first, so the pool ends on quick ones
        for lr, momentum in itertools.product(LRS, MOMENTA)
        for seed in seeds
    ]
    with ProcessPoolExecutor(processes, mp_context=get_context("spawn")) as pool:
        return [run for pair in pool.map(train_pair, jobs) for run in pair]


def analyse(runs: list[dict[str, Any]], settings: list[Setting]) -> list[dict[str, Any]]:
    by_key = {(r["model"], r["lr"], r["momentum"], r["delay"], r["seed"]): r for r in runs}
    cases = []
    for setting in settings:
        for (lr, momentum), seed in itertools.product(
            itertools.product(LRS, MOMENTA), sorted({r["seed"] for r in runs})
        ):
            data = by_key.get((setting.model, lr, momentum, 0, seed))
            delayed = by_key.get((setting.model, lr, momentum, 1, seed))
            if data is None or delayed is None:
                continue
            start_loss = data["curve"][0][1]
            targets = checkpoint_targets(setting, data["curve"])
            for fraction, (at, target) in zip(CHECKPOINTS, targets, strict=True):
                n_data = iterations_to(data["curve"], target)
                n_delay = iterations_to(delayed["curve"], target)
                reached = n_delay != float("inf")
                last = setting.iterations * DELAY_FACTOR
                cases.append(
                    {
                        "model": setting.model,
                        "lr": lr,
                        "momentum": momentum,
                        "seed": seed,
                        "checkpoint": fraction,
                        "checkpoint_iteration": at,
                        "target_loss": target,
                        "loss_drop": round(start_loss - target, 5),
                        "iters_data": n_data,
                        "iters_2bw": n_delay if reached else None,
                        "reached": reached,
                        "eta_measured": n_data / (n_delay if reached else last),
                    }
                )
    return cases


def seed_means(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (model, lr, momentum): eta over every checkpoint and seed (the mean of the
    per-case etas; censored cases enter at their upper bound and are counted)."""
    groups: dict[tuple[str, float, float], list[dict[str, Any]]] = {}
    for case in cases:
        groups.setdefault((case["model"], case["lr"], case["momentum"]), []).append(case)
    rows = []
    for (model, lr, momentum), members in groups.items():
        etas = [c["eta_measured"] for c in members]
        per_seed: dict[int, list[float]] = {}
        for c in members:
            per_seed.setdefault(c["seed"], []).append(c["eta_measured"])
        rows.append(
            {
                "model": model,
                "lr": lr,
                "momentum": momentum,
                "eta_measured": round(statistics.fmean(etas), 4),
                "eta_seed_min": round(min(statistics.fmean(v) for v in per_seed.values()), 4),
                "eta_seed_max": round(max(statistics.fmean(v) for v in per_seed.values()), 4),
                "eta_at_checkpoint": {
                    str(f): round(
                        statistics.fmean(
                            c["eta_measured"] for c in members if c["checkpoint"] == f
                        ),
                        4,
                    )
                    for f in CHECKPOINTS
                },
                "censored": sum(not c["reached"] for c in members),
                "cases": len(members),
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--models", nargs="+", default=[s.model for s in SETTINGS])
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--analyse", action="store_true", help="re-analyse the saved curves")
    parser.add_argument("--fit", action="store_true", help="fit and score the model too")
    parser.add_argument("--no-write", action="store_true", help="write no result file")
    parser.add_argument(
        "--check-engine",
        type=int,
        metavar="ITERATIONS",
        help="only compare the 2BW engine with the bench's rules after ITERATIONS (lr 0.01, "
        "momentum 0.9, seed 0, every --models model)",
    )
    parser.add_argument("-o", "--output", choices=("json", "text"), default="text")
    args = parser.parse_args()
    settings = [s for s in SETTINGS if s.model in args.models]
    if args.check_engine:
        checks = [check_engine(s.model, 0.01, 0.9, args.check_engine) for s in settings]
        emit({"provenance": provenance(), "engine_checks": checks}, args.output, [str(checks)])
        return
    began = time.perf_counter()
    load_before = os.getloadavg()[0]
    if args.analyse:
        saved = json.loads(RESULTS_FILE.read_text())
        runs, measured_with = saved["runs"], saved["measured_with"]
    else:
        runs = measure(settings, args.seeds, args.processes)
        measured_with = {
            "provenance": provenance(),
            "train_wall_s": round(time.perf_counter() - began, 1),
            "load_average_1min": {"before": load_before, "after": os.getloadavg()[0]},
        }
        if not args.no_write:  # the curves first: an analysis error loses no training
            RESULTS_FILE.parent.mkdir(parents=True, exist_ok=True)
            RESULTS_FILE.write_text(json.dumps({"measured_with": measured_with, "runs": runs}))
    cases = analyse(runs, settings)
    rows = seed_means(cases)
    fit = fit_and_score(rows) if args.fit else None
    result = {
        "measured_with": measured_with,
        "setup": {
            "workers": WORKERS,
            "batch_per_worker": BATCH,
            "optimizer": "torch.optim.SGD, no weight decay",
            "delay_factor": DELAY_FACTOR,
            "checkpoints": list(CHECKPOINTS),
            "settings": [vars(s) for s in settings],
        },
        "seed_means": rows,
        "fit": fit,
        "cases": cases,
        "runs": runs,
    }
    if not args.no_write:
        RESULTS_FILE.parent.mkdir(parents=True, exist_ok=True)
        RESULTS_FILE.write_text(json.dumps(result) + "\n")
    printed = {k: v for k, v in result.items() if k not in ("runs", "cases")}
    emit(printed, args.output, text_lines(rows, fit))


if __name__ == "__main__":
    main()
