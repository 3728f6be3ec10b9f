"""SPB's predicted η for AdamW models from Adam-preconditioned vs plain-gradient noise.

``bench/spb_efficiency.py`` saved its runs (bench/results/spb_efficiency_runs/) with the noise
measured on plain gradients. This re-trains only the full-backprop run of an AdamW model, with
today's engine, which measures the noise in Adam's preconditioned space
(worker/spb/preconditioner.py); training is unchanged by the measurement, so the loss curve must
equal the saved one (checked). The measured η of every SPB plan comes from the saved SPB runs;
the predicted η is computed twice, from the saved (plain) and the new (preconditioned) noise.

    python -m bench.spb_adam_noise --model gpt_small --seeds 0 1 2 -o json
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import Any

from bench.spb_common import emit, provenance
from bench.spb_efficiency_scoring import analyse, summarise
from bench.spb_efficiency_training import PLANS, RESULTS, RUN_CACHE, SETTINGS, train_curve

RESULTS_FILE = RESULTS / "spb_adam_noise.json"


def _saved(label: str, plan: str, seed: int) -> dict[str, Any]:
    path = RUN_CACHE / f"{label}-{plan.replace(':', '_')}-{seed}.json"
    return dict(json.loads(path.read_text())["run"])


def _figure(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    adamw = [s.label for s in SETTINGS if s.optimizer == "adamw"]
    parser.add_argument("--model", choices=adamw, default="gpt_small")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("-o", "--output", choices=("json", "text"), default="text")
    args = parser.parse_args()
    setting = next(s for s in SETTINGS if s.label == args.model)
    started = time.perf_counter()
    with ProcessPoolExecutor(args.processes, mp_context=get_context("spawn")) as pool:
        fresh = list(
            pool.map(
                train_curve, [setting] * len(args.seeds), ["none"] * len(args.seeds), args.seeds
            )
        )
    plain_runs, adam_runs, curves_equal = [], [], []
    for seed, run in zip(args.seeds, fresh, strict=True):
        saved_full = _saved(setting.label, "none", seed)
        curves_equal.append(
            [list(map(float, p)) for p in run["curve"]]
            == [list(map(float, p)) for p in saved_full["curve"]]
        )
        spb = [_saved(setting.label, plan, seed) for plan in PLANS[1:]]
        plain_runs += [saved_full, *spb]
        adam_runs += [run, *spb]
    plain, adam = analyse(plain_runs, [setting]), analyse(adam_runs, [setting])
    rows = [
        {
            "plan": p["plan"],
            "seed": p["seed"],
            "checkpoint": p["checkpoint"],
            "eta_measured": p["eta_measured"],
            "reached": p["reached"],
            "predicted_plain": p["eta_predicted"],
            "predicted_adam": a["eta_predicted"],
            "abs_error_plain": p["abs_error"],
            "abs_error_adam": a["abs_error"],
        }
        for p, a in zip(plain, adam, strict=True)
    ]
    document: dict[str, Any] = {
        "provenance": {
            **{k: v for k, v in provenance().items() if k in ("command", "date", "machine")},
            "model": setting.label,
            "seeds": args.seeds,
            "wall_s": round(time.perf_counter() - started, 1),
            "loss_curves_equal_saved": curves_equal,
        },
        "summary_plain": summarise(plain),
        "summary_adam": summarise(adam),
        "cases": rows,
    }
    for name in ("summary_plain", "summary_adam"):
        document[name] = {
            k: document[name][k]
            for k in ("cases", "scored", "within_target", "mean_abs_error", "max_abs_error")
        } | {"seed_means": document[name]["seed_means"]}
    if not args.no_write:
        RESULTS_FILE.write_text(json.dumps(document, indent=2) + "\n")
    lines = [
        f"{r['plan']:>10} seed {r['seed']} @{r['checkpoint']:.2f}: measured "
        f"{r['eta_measured']:.3f} plain {_figure(r['predicted_plain'])} "
        f"adam {_figure(r['predicted_adam'])}" + ("" if r["reached"] else " (not reached)")
        for r in rows
    ]
    for name in ("summary_plain", "summary_adam"):
        s = document[name]
        lines.append(
            f"{name}: {s['within_target']}/{s['scored']} within 0.10, "
            f"mean |err| {_figure(s['mean_abs_error'])}, max {_figure(s['max_abs_error'])}"
        )
    lines.append(f"loss curves equal the saved ones: {curves_equal}")
    emit(document, args.output, lines)


if __name__ == "__main__":
    main()
