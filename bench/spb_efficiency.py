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
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, replace
from multiprocessing import get_context
from typing import Any

from bench.spb_common import emit, provenance
from bench.spb_efficiency_scoring import TARGET_ABS_ERROR, analyse, still_improving, summarise
from bench.spb_efficiency_training import PLANS, RESULTS, RUN_CACHE, SETTINGS, WORKERS, cached_run

RESULTS_FILE = RESULTS / "spb_efficiency.json"


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
