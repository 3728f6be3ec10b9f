"""The 2BW efficiency model fitted and scored on bench/pipeline_efficiency.py's measured seed
means: fitted on the FIT_LRS columns, one h per model (what the oracle uses) and, as an
ablation, one h for every model; scored on the held-out columns and on every case."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from bench.spb_efficiency_scoring import TARGET_ABS_ERROR
from jigsaw.efficiency.pipeline import fit_curvature, pipeline_eta

FIT_LRS = (0.01, 0.05)
FORMS = ("per_model", "one_for_all")

Predict = Callable[[dict[str, Any]], float]


def score(rows: list[dict[str, Any]], predict: Predict) -> dict[str, Any]:
    scored = []
    for row in rows:
        predicted = predict(row)
        error = abs(predicted - row["eta_measured"])
        scored.append({**row, "eta_predicted": round(predicted, 4), "abs_error": round(error, 4)})
    within = sum(r["abs_error"] <= TARGET_ABS_ERROR for r in scored)
    return {
        "rows": scored,
        "within_target": within,
        "count": len(scored),
        "mean_abs_error": round(statistics.fmean(r["abs_error"] for r in scored), 4)
        if scored
        else None,
        "misses": [
            {k: r[k] for k in ("model", "lr", "momentum", "eta_measured", "eta_predicted")}
            for r in scored
            if r["abs_error"] > TARGET_ABS_ERROR
        ],
    }


def fit_and_score(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The model (jigsaw/efficiency/pipeline.py) fitted on the FIT_LRS columns and scored on
    the rest: one h per model (what the oracle uses), and one h for every model (ablation)."""
    train = [r for r in rows if r["lr"] in FIT_LRS]
    held = [r for r in rows if r["lr"] not in FIT_LRS]

    def fitted(members: list[dict[str, Any]]) -> float:
        return fit_curvature([(r["lr"], r["momentum"], r["eta_measured"]) for r in members])

    models = sorted({r["model"] for r in rows})
    per_model = {m: fitted([r for r in train if r["model"] == m]) for m in models}
    shared = fitted(train)
    forms: dict[str, dict[str, float]] = {
        "per_model": per_model,
        "one_for_all": dict.fromkeys(models, shared),
    }
    out: dict[str, Any] = {"fitted_on": f"lr in {list(FIT_LRS)} (every momentum)"}
    for name, curvature in forms.items():

        def predict(row: dict[str, Any], h: dict[str, float] = curvature) -> float:
            return pipeline_eta(row["lr"], row["momentum"], h[row["model"]])

        out[name] = {
            "curvature": {m: round(h, 3) for m, h in curvature.items()},
            "train": score(train, predict),
            "held_out": score(held, predict),
            "every_case": score(rows, predict),
        }
    return out


def text_lines(rows: list[dict[str, Any]], fit: dict[str, Any] | None) -> list[str]:
    lines = []
    predicted: dict[str, dict[tuple[str, float, float], float]] = {}
    if fit is not None:
        for form in FORMS:
            predicted[form] = {
                (r["model"], r["lr"], r["momentum"]): r["eta_predicted"]
                for r in fit[form]["every_case"]["rows"]
            }
    for r in rows:
        key = (r["model"], r["lr"], r["momentum"])
        pred = "".join(f" {form} {table[key]:.3f}" for form, table in predicted.items())
        lines.append(
            f"{r['model']:>10} lr {r['lr']:<5} momentum {r['momentum']:<4} eta "
            f"{r['eta_measured']:.3f} (seeds {r['eta_seed_min']:.2f}-{r['eta_seed_max']:.2f}, "
            f"censored {r['censored']}/{r['cases']}){pred}"
        )
    if fit is not None:
        for form in FORMS:
            lines.append(f"{form}: h {fit[form]['curvature']}")
            for part in ("train", "held_out", "every_case"):
                s = fit[form][part]
                lines.append(
                    f"  {part}: {s['within_target']}/{s['count']} within {TARGET_ABS_ERROR}, "
                    f"mean |err| {s['mean_abs_error']}"
                )
    return lines
