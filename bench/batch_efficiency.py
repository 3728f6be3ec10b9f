"""Batch-size efficiency along the training curve: measured vs the goodput model's prediction.

For each model and seed, the reference run trains at global batch B (4 workers, the settings
of ``bench/spb_efficiency.py``, full backprop) and two more runs at 2B and B/2, every worker's
batch scaled, for 1.25x and 2.25x the reference's T iterations. Their learning rate follows
the runtime's rule (:func:`jigsaw.efficiency.lr_scaling.scaled_learning_rate`): AdaScale for SGD,
its
gain from the run's own online noise statistics, re-applied before every iteration
(AdaScale's own cadence; the runtime re-applies it at lease boundaries); the square-root rule
for AdamW.

Measured, at checkpoint f (25/50/75/100% of T): L_f is the loss the reference reached at f*T
(the loss of ``bench/spb_efficiency.py``: a fixed training subset, eval mode) and n_x(L_f) the
first (interpolated) iteration at which run x reaches it. The per-sample efficiency of batch
M = s*B relative to B is E_measured(f) = samples_ref / samples_M = n_ref(L_f) / (s * n_M(L_f))
(1: a sample at M is worth one at B; 1/s: M needs as many iterations as B). A run that never
gets there is scored at its last iteration: an upper bound, flagged ``reached: false``.

Predicted: the goodput model's efficiency (:meth:`jigsaw.goodput.noise.GradientNoise.efficiency`,
E_t(M) = (phi_t + B) / (phi_t + M), phi_t the gradient noise scale of the reference run's
online statistics at iteration t; for AdamW measured in Adam's preconditioned space). One
iteration at M covers r_t = s * E_t(M) reference iterations, so M needs sum_{t < n} 1/r_t
iterations for the reference's n = n_ref(L_f), and E_predicted(f) = n / (s * sum_{t < n} 1/r_t)
(the harmonic mean of r along the curve, over s). Ablation rows for AdamW: the same prediction
from plain-gradient noise (the reference runs ``bench/spb_efficiency.py`` saved before the
engine measured preconditioned noise; training is unchanged by the measurement, checked).

    python -m bench.batch_efficiency -o json             # train, analyse
    python -m bench.batch_efficiency --analyse -o json   # re-analyse saved runs

Runs are saved to bench/results/batch_efficiency_runs/ as they finish and reused.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from bench.spb_common import emit, harmonic_mean_along, iterations_to, provenance
from bench.spb_efficiency_scoring import CHECKPOINTS, TARGET_ABS_ERROR
from bench.spb_efficiency_training import RESULTS, RUN_CACHE, SETTINGS, Setting, train_curve
from jigsaw.goodput.noise import GradientNoise
from jigsaw.model.block_noise import BlockNoise

FACTORS = (2.0, 0.5)
LENGTH = {1.0: 1.0, 2.0: 1.25, 0.5: 2.25}
"""Run length per batch factor, in reference iterations T: long enough to reach the
reference's final loss when E is as low as 1/s (B/2) or slightly over-estimated (2B)."""
EXTRA_SETTINGS = (Setting("mlp", "mlp_adamw", "sklearn-digits", 600, 20, 32, "adamw", 1e-3, 1437),)
"""A second cheap AdamW model (Adam's usual rate; ``bench/spb_efficiency.py`` has no such run,
so no plain-noise ablation for it)."""
RESULTS_FILE = RESULTS / "batch_efficiency.json"
BATCH_CACHE = RESULTS / "batch_efficiency_runs"


def noise_space(setting: Setting) -> str:
    return "adam-preconditioned" if setting.optimizer == "adamw" else "gradient"


def run_key(setting: Setting, factor: float) -> dict[str, Any]:
    return {
        **setting.run_key("none"),
        "batch_factor": factor,
        "run_iterations": round(setting.iterations * LENGTH[factor]),
        "noise_space": noise_space(setting),
        "lr_rule": "sqrt" if setting.optimizer == "adamw" else "adascale-every-iteration",
    }


def cached_batch_run(setting: Setting, factor: float, seed: int) -> dict[str, Any]:
    path = BATCH_CACHE / f"{setting.label}-b{factor:g}-{seed}.json"
    if path.is_file():
        saved = json.loads(path.read_text())
        if saved.get("setting") == run_key(setting, factor):
            return dict(saved["run"])
    run = train_curve(setting, "none", seed, factor, round(setting.iterations * LENGTH[factor]))
    run["batch_factor"] = factor
    BATCH_CACHE.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"setting": run_key(setting, factor), "run": run}) + "\n")
    return run


def saved_plain_reference(setting: Setting, seed: int) -> dict[str, Any] | None:
    """``bench/spb_efficiency.py``'s full-backprop run (plain-gradient noise for AdamW)."""
    path = RUN_CACHE / f"{setting.label}-none-{seed}.json"
    if not path.is_file():
        return None
    saved = json.loads(path.read_text())
    return dict(saved["run"]) if saved.get("setting") == setting.run_key("none") else None


def _rate(noise: tuple[BlockNoise, ...], factor: float, batch: int) -> float:
    """r = s * E(s * B): reference iterations one iteration at s * B is worth."""
    gradient = GradientNoise.of_blocks(noise)
    assert gradient is not None
    return factor * float(gradient.efficiency(factor * batch, batch))


def predicted_efficiency(stats: list[list[Any]], factor: float, batch: int, until: float) -> Any:
    """E_predicted: the harmonic mean along the reference curve of r_t = s * E_t(s * B), over s."""
    mean_rate = harmonic_mean_along(stats, until, lambda noise: _rate(noise, factor, batch))
    return None if mean_rate is None else mean_rate / factor


def predicted_efficiency_own_noise(
    stats: list[list[Any]], factor: float, batch: int, until: float
) -> float | None:
    """Ablation: the noise measured at the batch that is run. Walking the s * B run's own
    statistics (r_u from its iteration u, the first covering the iterations before them), the
    first u at which sum r_u reaches the reference's ``until`` iterations is the predicted
    n_M; E = until / (s * n_M). None if the run's statistics never cover ``until``."""
    points = [
        (int(it), tuple(BlockNoise(**e) for e in entries)) for it, entries in stats if entries
    ]
    covered = 0.0
    for index, (iteration, noise) in enumerate(points):
        start = 0.0 if index == 0 else float(iteration)
        end = float(points[index + 1][0]) if index + 1 < len(points) else float("inf")
        rate = _rate(noise, factor, batch)
        if covered + rate * (end - start) >= until:
            return until / (factor * (start + (until - covered) / rate))
        covered += rate * (end - start)
    return None


def analyse(
    runs: dict[tuple[str, float, int], dict[str, Any]],
    plain: dict[tuple[str, int], dict[str, Any]],
    settings: list[Setting],
) -> list[dict[str, Any]]:
    cases = []
    for setting in settings:
        batch = 4 * setting.batch_size
        for factor in FACTORS:
            for seed in sorted({k[2] for k in runs}):
                ref = runs.get((setting.label, 1.0, seed))
                other = runs.get((setting.label, factor, seed))
                if ref is None or other is None:
                    continue
                length = round(setting.iterations * LENGTH[factor])
                for fraction in CHECKPOINTS:
                    at, target = min(
                        ref["curve"], key=lambda p: abs(p[0] - fraction * setting.iterations)
                    )
                    n_ref = iterations_to(ref["curve"], target)
                    n_other = iterations_to(other["curve"], target)
                    reached = n_other != float("inf")
                    measured = n_ref / (factor * (n_other if reached else length))
                    predicted = predicted_efficiency(ref["stats"], factor, batch, n_ref)
                    base = plain.get((setting.label, seed))
                    ablation = (
                        predicted_efficiency(base["stats"], factor, batch, n_ref)
                        if base is not None and setting.optimizer == "adamw"
                        else None
                    )
                    own = predicted_efficiency_own_noise(other["stats"], factor, batch, n_ref)
                    cases.append(
                        {
                            "model": setting.label,
                            "optimizer": setting.optimizer,
                            "batch_factor": factor,
                            "global_batch": round(factor * batch),
                            "reference_batch": batch,
                            "seed": seed,
                            "checkpoint": fraction,
                            "checkpoint_iteration": at,
                            "target_loss": target,
                            "iters_ref": n_ref,
                            "iters_other": n_other if reached else None,
                            "reached": reached,
                            "iterations_ratio_measured": (n_other if reached else length) / n_ref,
                            "efficiency_measured": measured,
                            "efficiency_predicted": predicted,
                            "abs_error": abs(measured - predicted)
                            if predicted is not None and reached
                            else None,
                            "efficiency_predicted_plain_noise": ablation,
                            "efficiency_predicted_own_noise": own,
                        }
                    )
    return cases


def seed_means(cases: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    groups: dict[tuple[str, float, float], list[dict[str, Any]]] = {}
    for case in cases:
        groups.setdefault((case["model"], case["batch_factor"], case["checkpoint"]), []).append(
            case
        )
    rows = []
    for (model, factor, checkpoint), members in groups.items():
        if not all(c["reached"] and c[key] is not None for c in members):
            rows.append(
                {"model": model, "batch_factor": factor, "checkpoint": checkpoint, "censored": True}
            )
            continue
        measured = [c["efficiency_measured"] for c in members]
        predicted = statistics.fmean(c[key] for c in members)
        error = abs(statistics.fmean(measured) - predicted)
        rows.append(
            {
                "model": model,
                "optimizer": members[0]["optimizer"],
                "batch_factor": factor,
                "checkpoint": checkpoint,
                "seeds": len(members),
                "measured_mean": statistics.fmean(measured),
                "measured_std": statistics.stdev(measured) if len(measured) > 1 else 0.0,
                "predicted_mean": predicted,
                "abs_error_of_means": error,
                "within_target": error <= TARGET_ABS_ERROR,
            }
        )
    return rows


def summarise(cases: list[dict[str, Any]]) -> dict[str, Any]:
    def score(rows: list[dict[str, Any]]) -> dict[str, Any]:
        scored = [r for r in rows if not r.get("censored")]
        within = sum(r["within_target"] for r in scored)
        return {
            "scored": len(scored),
            "censored": len(rows) - len(scored),
            "within_target": within,
            "fraction_within": within / len(scored) if scored else None,
            "mean_abs_error": statistics.fmean(r["abs_error_of_means"] for r in scored)
            if scored
            else None,
            "misses": [r for r in scored if not r["within_target"]],
        }

    main = seed_means(cases, "efficiency_predicted")
    with_plain = [c for c in cases if c["efficiency_predicted_plain_noise"] is not None]
    per_seed = [c for c in cases if c["abs_error"] is not None]
    return {
        "target": f">= 80% of seed-mean cases within {TARGET_ABS_ERROR}",
        "seed_means": score(main),
        "per_seed": {
            "scored": len(per_seed),
            "within_target": sum(c["abs_error"] <= TARGET_ABS_ERROR for c in per_seed),
            "censored": sum(not c["reached"] for c in cases),
        },
        "per_model": {
            model: score([r for r in main if r["model"] == model])
            for model in dict.fromkeys(c["model"] for c in cases)
        },
        "adamw_preconditioned": score([r for r in main if r.get("optimizer") == "adamw"]),
        "ablation_adamw_plain_noise": score(
            seed_means(with_plain, "efficiency_predicted_plain_noise")
        ),
        "ablation_noise_at_run_batch": score(seed_means(cases, "efficiency_predicted_own_noise")),
        "seed_mean_rows": main,
    }


def markdown_table(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| model | optimizer | batch | at | measured E (mean ± sd) | predicted E | abs error | "
        "within 0.10 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        head = f"| `{r['model']}` | {r.get('optimizer', '')} | {r['batch_factor']:g}x | "
        head += f"{r['checkpoint']:.0%} |"
        if r.get("censored"):
            lines.append(head + " censored | | | |")
            continue
        lines.append(
            head + f" {r['measured_mean']:.3f} ± {r['measured_std']:.3f} | "
            f"{r['predicted_mean']:.3f} | {r['abs_error_of_means']:.3f} | "
            f"{'✓' if r['within_target'] else '✗'} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument(
        "--models",
        nargs="+",
        default=["mlp", "digits_cnn", "gpt_small", "mlp_adamw", "char_lstm"],
    )
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--analyse", action="store_true", help="re-analyse the saved runs")
    parser.add_argument("--no-write", action="store_true", help="write no result files")
    parser.add_argument("-o", "--output", choices=("json", "text", "markdown"), default="text")
    args = parser.parse_args()
    by_label = {s.label: s for s in (*SETTINGS, *EXTRA_SETTINGS)}
    unknown = set(args.models) - set(by_label)
    if unknown:
        parser.error(f"unknown model(s) {sorted(unknown)}: choose from {sorted(by_label)}")
    settings = [by_label[label] for label in args.models]  # in the order given
    started = time.perf_counter()
    jobs = [(s, f, seed) for s in settings for seed in args.seeds for f in (1.0, *FACTORS)]
    found: list[dict[str, Any]] = []
    if args.analyse:
        for setting, factor, seed in jobs:
            path = BATCH_CACHE / f"{setting.label}-b{factor:g}-{seed}.json"
            if path.is_file():
                saved = json.loads(Path(path).read_text())
                if saved.get("setting") == run_key(setting, factor):
                    found.append(saved["run"])
    else:
        with ProcessPoolExecutor(args.processes, mp_context=get_context("spawn")) as pool:
            found = list(pool.map(cached_batch_run, *zip(*jobs, strict=True)))
    runs = {(r["model"], float(r.get("batch_factor", 1.0)), r["seed"]): r for r in found}
    plain, same_curve = {}, {}
    for setting in settings:
        for seed in args.seeds:
            base = saved_plain_reference(setting, seed)
            ref = runs.get((setting.label, 1.0, seed))
            if base is not None and ref is not None:
                plain[(setting.label, seed)] = base
                same_curve[f"{setting.label}|{seed}"] = base["curve"] == ref["curve"]
    cases = analyse(runs, plain, settings)
    document: dict[str, Any] = {
        "provenance": {
            **{k: v for k, v in provenance().items() if k != "command"},
            "command": "python -m bench.batch_efficiency" + (" --analyse" if args.analyse else ""),
            "wall_s_this_invocation": round(time.perf_counter() - started, 1),
            "train_wall_s_per_run": {
                f"{m}|{f:g}x|{s}": round(r["wall_s"], 1) for (m, f, s), r in runs.items()
            },
            "processes": args.processes,
            "settings": [asdict(s) for s in settings],
            "length_in_reference_iterations": {f"{k:g}x": v for k, v in LENGTH.items()},
            "reference_curve_equals_spb_efficiency_saved_run": same_curve,
            "method": "\n\n".join(__doc__.split("\n\n")[1:4]),
        },
        "summary": summarise(cases),
        "cases": cases,
    }
    if not args.no_write:
        RESULTS.mkdir(exist_ok=True)
        RESULTS_FILE.write_text(json.dumps(document, indent=2) + "\n")
    if args.output == "markdown":
        print("\n".join(markdown_table(document["summary"]["seed_mean_rows"])))
        return
    summary = {k: v for k, v in document["summary"].items() if k != "seed_mean_rows"}
    table = markdown_table(document["summary"]["seed_mean_rows"])
    emit(document, args.output, [*table, json.dumps(summary, indent=2)])


if __name__ == "__main__":
    main()
