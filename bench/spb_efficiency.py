"""Statistical efficiency eta(plan) along the whole training curve: measured vs predicted.

For each model, plan and seed, a 4-worker data-parallel job trains on real data (sklearn
digits; Python's pydoc topics text for the language models). The group is simulated in one
process: the unmodified SPBTrainer on 4 threads joined by the in-process collectives backend
(tests/worker/test_spb_equivalence.py checks it against real gloo processes). Independent runs
go to a small process pool.

Measured eta at checkpoint f (25/50/75/100% of the full-backprop run of T iterations): let
L_f be the training loss (on a fixed subset of the training set, evaluated in eval mode) the
full run reached at iteration f*T. eta_measured(f) = n_full(L_f) / n_spb(L_f), where n_x(L)
is the first (interpolated) iteration at which run x's loss is <= L. An SPB run that never
gets there is scored at its last iteration: an upper bound, flagged ``reached: false``.

Predicted eta at checkpoint f: the eta model (jigsaw/efficiency/model.py) applied to the
per-block gradient
statistics the engine measured online during the full-backprop run (every block has 4
contributors there, so every block is measured every iteration), at every evaluation point
up to n_full(L_f). Iterations at rate eta(t) cover the full run's progress in
sum_t 1/eta(t) iterations, so eta_predicted(f) = n / sum_{t < n} 1/eta(t), n = n_full(L_f)
(a harmonic mean along the curve).

    python -m bench.spb_efficiency -o json            # train, analyse
    python -m bench.spb_efficiency --analyse -o json  # re-analyse saved runs

Every run is saved to bench/results/spb_efficiency_runs/ as it finishes and reused when the
same setting is asked for again, so an interrupted benchmark resumes where it stopped.
    python -m bench.spb_efficiency --report -o json   # print committed results
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, replace
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import torch

from bench.spb_common import emit, harmonic_mean_along, iterations_to, provenance
from jigsaw.efficiency.lr_scaling import scaled_learning_rate
from jigsaw.efficiency.model import eta_for_plan
from jigsaw.model.plan import SPBPlan, resolve_plan
from worker.spb.model_plans import model_plan
from worker.spb.thread_collectives import run_threads
from worker.spb.trainer import SPBTrainer
from worker.spb.trainer_setup import TrainerConfig
from worker.zoo import load_workload

WORKERS = 4
PLANS = ("none", "staircase", "uniform:1", "uniform:3")
CHECKPOINTS = (0.25, 0.5, 0.75, 1.0)
TARGET_ABS_ERROR = 0.10
RESULTS = Path(__file__).parent / "results"
RESULTS_FILE = RESULTS / "spb_efficiency.json"
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


def predicted_eta(stats: list[list[Any]], plan: SPBPlan, until: float) -> float | None:
    """Harmonic mean of the model's eta(t) over iterations [0, until)."""
    return harmonic_mean_along(stats, until, lambda noise: eta_for_plan(noise, plan).eta)


def analyse(runs: list[dict[str, Any]], settings: list[Setting]) -> list[dict[str, Any]]:
    by_key = {(r["model"], r["plan"], r["seed"]): r for r in runs}
    seeds = sorted({r["seed"] for r in runs})
    cases = []
    for setting in settings:
        for plan_name in PLANS[1:]:
            for seed in seeds:
                full = by_key.get((setting.label, "none", seed))
                spb = by_key.get((setting.label, plan_name, seed))
                if full is None or spb is None:
                    continue
                plan = resolve_plan(plan_name, WORKERS, int(full["blocks"]))
                final_spb = spb["curve"][-1][1]
                for fraction in CHECKPOINTS:
                    # The evaluation point nearest to fraction * T (exact when eval_every divides).
                    at, target = min(
                        full["curve"], key=lambda p: abs(p[0] - fraction * setting.iterations)
                    )
                    n_full = iterations_to(full["curve"], target)
                    n_spb = iterations_to(spb["curve"], target)
                    reached = n_spb != float("inf")
                    measured = n_full / (n_spb if reached else setting.length(plan_name))
                    predicted = predicted_eta(full["stats"], plan, n_full)
                    cases.append(
                        {
                            "model": setting.label,
                            "plan": plan_name,
                            "depths": list(plan.depths),
                            "seed": seed,
                            "checkpoint": fraction,
                            "checkpoint_iteration": at,
                            "target_loss": target,
                            "iters_full": n_full,
                            "iters_spb": n_spb if reached else None,
                            "reached": reached,
                            "eta_measured": measured,
                            "eta_predicted": predicted,
                            "abs_error": abs(measured - predicted)
                            if predicted is not None and reached
                            else None,
                            "final_loss_full": full["curve"][-1][1],
                            "final_loss_spb": final_spb,
                        }
                    )
    return cases


def still_improving(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per full-backprop run: loss over the last 25% of the run vs. the 25% before it."""
    rows = []
    for run in runs:
        if run["plan"] != "none":
            continue
        curve = run["curve"]
        quarter = max(1, len(curve) // 4)
        last = statistics.fmean(v for _, v in curve[-quarter:])
        before = statistics.fmean(v for _, v in curve[-2 * quarter : -quarter])
        rows.append(
            {
                "model": run["model"],
                "seed": run["seed"],
                "loss_last_quarter": last,
                "loss_quarter_before": before,
                "still_improving": last < before,
            }
        )
    return rows


def summarise(cases: list[dict[str, Any]]) -> dict[str, Any]:
    """Scored cases are those where the SPB run reached the target; a censored case (never
    reached within its run) has only an upper bound on eta and is listed on its own."""
    scored = [c for c in cases if c["abs_error"] is not None]
    misses = [c for c in scored if c["abs_error"] > TARGET_ABS_ERROR]
    censored = [c for c in cases if not c["reached"]]
    keys = ("model", "plan", "seed", "checkpoint", "eta_measured", "eta_predicted", "abs_error")
    per_model: dict[str, dict[str, Any]] = {}
    for case in scored:
        row = per_model.setdefault(case["model"], {"scored": 0, "within_target": 0, "errors": []})
        row["scored"] += 1
        row["within_target"] += case["abs_error"] <= TARGET_ABS_ERROR
        row["errors"].append(case["abs_error"])
    for row in per_model.values():
        errors = row.pop("errors")
        row["mean_abs_error"] = statistics.fmean(errors)
        row["max_abs_error"] = max(errors)
    groups: dict[tuple[str, str, float], list[dict[str, Any]]] = {}
    for case in cases:
        groups.setdefault((case["model"], case["plan"], case["checkpoint"]), []).append(case)
    seed_means = []
    for (model, plan, checkpoint), members in groups.items():
        if not all(c["reached"] and c["eta_predicted"] is not None for c in members):
            continue
        measured = [c["eta_measured"] for c in members]
        predicted = statistics.fmean(c["eta_predicted"] for c in members)
        seed_means.append(
            {
                "model": model,
                "plan": plan,
                "checkpoint": checkpoint,
                "seeds": len(members),
                "eta_measured_mean": statistics.fmean(measured),
                "eta_measured_std": statistics.stdev(measured) if len(measured) > 1 else 0.0,
                "eta_predicted_mean": predicted,
                "abs_error_of_means": abs(statistics.fmean(measured) - predicted),
            }
        )
    return {
        "cases": len(cases),
        "scored": len(scored),
        "within_target": len(scored) - len(misses),
        "target_abs_error": TARGET_ABS_ERROR,
        "mean_abs_error": statistics.fmean(c["abs_error"] for c in scored) if scored else None,
        "max_abs_error": max((c["abs_error"] for c in scored), default=None),
        "per_model": per_model,
        "misses": [{k: c[k] for k in keys} for c in misses],
        "seed_means": seed_means,
        "censored": [
            {**{k: c[k] for k in keys if k != "abs_error"}, "eta_measured_is_upper_bound": True}
            for c in censored
        ],
    }


def text_lines(cases: list[dict[str, Any]]) -> list[str]:
    lines = []
    for c in cases:
        pred = "  n/a" if c["eta_predicted"] is None else f"{c['eta_predicted']:.3f}"
        err = "  n/a" if c["abs_error"] is None else f"{c['abs_error']:.3f}"
        flag = "" if c["reached"] else " (not reached: upper bound)"
        lines.append(
            f"{c['model']:>10} {c['plan']:>10} seed {c['seed']} @{c['checkpoint']:.2f}: "
            f"measured {c['eta_measured']:.3f} predicted {pred} |err| {err}{flag}"
        )
    return lines


def markdown_table(cases: list[dict[str, Any]]) -> list[str]:
    """One row per (model, plan, checkpoint): every seed's measured / predicted / |error|."""
    lines = [
        "| model | plan | at | seed: measured / predicted / abs error (✗ > 0.10, † censored) |",
        "|---|---|---|---|",
    ]
    groups: dict[tuple[str, str, float], list[dict[str, Any]]] = {}
    for case in cases:
        groups.setdefault((case["model"], case["plan"], case["checkpoint"]), []).append(case)
    for (model, plan, checkpoint), members in groups.items():
        cells = []
        for c in members:
            pred = "n/a" if c["eta_predicted"] is None else f"{c['eta_predicted']:.2f}"
            if not c["reached"]:
                cells.append(f"{c['seed']}: ≤{c['eta_measured']:.2f} / {pred} †")
                continue
            err = c["abs_error"]
            mark = "" if err is None or err <= TARGET_ABS_ERROR else " ✗"
            err_text = "n/a" if err is None else f"{err:.2f}"
            cells.append(f"{c['seed']}: {c['eta_measured']:.2f} / {pred} / {err_text}{mark}")
        lines.append(f"| `{model}` | {plan} | {checkpoint:.0%} | {'; '.join(cells)} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--models", nargs="+", default=[s.label for s in SETTINGS])
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=None, help="override every length")
    parser.add_argument("--analyse", action="store_true", help="re-analyse the saved runs")
    parser.add_argument("--report", action="store_true", help="print the committed results")
    parser.add_argument("--no-write", action="store_true", help="write no result files")
    parser.add_argument("-o", "--output", choices=("json", "text", "markdown"), default="text")
    args = parser.parse_args()
    if args.report:
        if not RESULTS_FILE.is_file():
            print(f"error: {RESULTS_FILE} is missing: run the benchmark first", file=sys.stderr)
            raise SystemExit(2)
        document = json.loads(RESULTS_FILE.read_text())
        cases = document["cases"]
        if args.output == "json":
            print(json.dumps(cases, indent=2))
        elif args.output == "markdown":
            print("\n".join(markdown_table(cases)))
        else:
            print("\n".join(text_lines(cases)))
        return
    unknown = set(args.models) - {s.label for s in SETTINGS}
    if unknown:
        parser.error(
            f"unknown model(s) {sorted(unknown)}: choose from {[s.label for s in SETTINGS]}"
        )
    settings = [s for s in SETTINGS if s.label in args.models]
    if args.iterations is not None:
        settings = [
            replace(s, iterations=args.iterations, eval_every=max(1, args.iterations // 20))
            for s in settings
        ]
    started = time.perf_counter()
    jobs = [(s, plan, seed) for s in settings for seed in args.seeds for plan in PLANS]
    if args.analyse:
        runs = []
        for setting, plan, seed in jobs:
            path = RUN_CACHE / f"{setting.label}-{plan.replace(':', '_')}-{seed}.json"
            if path.is_file():
                saved = json.loads(path.read_text())
                if saved.get("setting") == setting.run_key(plan):
                    runs.append(saved["run"])
    else:
        with ProcessPoolExecutor(args.processes, mp_context=get_context("spawn")) as pool:
            runs = list(pool.map(cached_run, *zip(*jobs, strict=True)))
    meta = {
        **{
            k: v
            for k, v in provenance().items()
            if k in ("command", "date", "torch_version", "machine")
        },
        "wall_s_this_invocation": round(time.perf_counter() - started, 1),
        "train_wall_s_per_run": {
            f"{r['model']}|{r['plan']}|{r['seed']}": round(r["wall_s"], 1) for r in runs
        },
        "processes": args.processes,
    }
    cases = analyse(runs, settings)
    document = {
        "provenance": {
            **meta,
            "workers": WORKERS,
            "settings": [asdict(s) for s in settings],
            "method": __doc__.split("\n\n")[1] + "\n\n" + __doc__.split("\n\n")[2],
        },
        "summary": summarise(cases),
        "still_improving": still_improving(runs),
        "cases": cases,
    }
    if not args.no_write:
        RESULTS.mkdir(exist_ok=True)
        RESULTS_FILE.write_text(json.dumps(document, indent=2) + "\n")
    emit(document, args.output, [*text_lines(cases), json.dumps(document["summary"], indent=2)])


if __name__ == "__main__":
    main()
