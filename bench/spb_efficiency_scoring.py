"""The η benchmark's scoring: measured against predicted η at each checkpoint of the full
backprop run (the method is in ``bench/spb_efficiency.py``'s docstring), whether the full
runs were still improving, and the summary (cases within the target, seed means, censored
cases)."""

from __future__ import annotations

import statistics
from typing import Any

from bench.spb_common import harmonic_mean_along, iterations_to
from bench.spb_efficiency_training import PLANS, WORKERS, Setting
from jigsaw.efficiency.model import eta_for_plan
from jigsaw.model.plan import SPBPlan, resolve_plan

CHECKPOINTS = (0.25, 0.5, 0.75, 1.0)
TARGET_ABS_ERROR = 0.10


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
