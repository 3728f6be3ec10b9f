"""Held-out evaluation of the calibration fit, and the global parameters the oracle uses.

Split rule: for each application, the distinct configurations (a ``placements.csv``
placement string, or a ``scalability.csv`` (nodes, replicas) pair) are shuffled with a seeded
``random.Random(seed)`` and dealt round-robin into ``folds`` folds. Every row is predicted by
the fit made on the other folds, so no configuration is ever seen in training at a local
batch size different from the one being predicted.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from jigsaw.oracle.calibration import AppFit, Measurement, fit_app, predict

SYNC_SIGNIFICANT_SHARE = 0.1
"""Rows whose measured sync is at least this share of the step are 'sync-bound'."""


@dataclass(frozen=True, slots=True)
class HeldOutErrors:
    """Mean absolute percentage errors (as fractions) of out-of-fold predictions."""

    rows: int
    step_mape: float
    sync_mape: float
    combined_mape: float
    """Mean over step and sync errors pooled together (2 x rows errors)."""
    sync_bound_rows: int
    sync_bound_sync_mape: float
    """Sync MAPE over rows where sync >= 10% of step, i.e. where sync matters."""

    def as_dict(self) -> dict[str, float | int]:
        return {
            "rows": self.rows,
            "step_mape_pct": round(100 * self.step_mape, 2),
            "sync_mape_pct": round(100 * self.sync_mape, 2),
            "combined_mape_pct": round(100 * self.combined_mape, 2),
            "sync_bound_rows": self.sync_bound_rows,
            "sync_bound_sync_mape_pct": round(100 * self.sync_bound_sync_mape, 2),
        }


def fold_of_each_row(rows: Sequence[Measurement], folds: int, seed: int) -> list[int]:
    configurations = sorted({r.placement for r in rows})
    random.Random(seed).shuffle(configurations)
    fold = {config: i % folds for i, config in enumerate(configurations)}
    return [fold[r.placement] for r in rows]


def out_of_fold_predictions(
    rows: Sequence[Measurement], folds: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    assignment = fold_of_each_row(rows, folds, seed)
    step = np.zeros(len(rows))
    sync = np.zeros(len(rows))
    for held_out in range(folds):
        train = [r for r, f in zip(rows, assignment, strict=True) if f != held_out]
        test = [i for i, f in enumerate(assignment) if f == held_out]
        if not test:
            continue
        predicted_step, predicted_sync = predict(fit_app(train), [rows[i] for i in test])
        step[test] = predicted_step
        sync[test] = predicted_sync
    return step, sync


def held_out_errors(
    rows: Sequence[Measurement], predicted_step: np.ndarray, predicted_sync: np.ndarray
) -> HeldOutErrors:
    step = np.array([r.step_time for r in rows])
    sync = np.array([r.sync_time for r in rows])
    step_err = np.abs(predicted_step - step) / step
    sync_err = np.abs(predicted_sync - sync) / sync
    bound = sync >= SYNC_SIGNIFICANT_SHARE * step
    return HeldOutErrors(
        rows=len(rows),
        step_mape=float(step_err.mean()),
        sync_mape=float(sync_err.mean()),
        combined_mape=float(np.concatenate([step_err, sync_err]).mean()),
        sync_bound_rows=int(bound.sum()),
        sync_bound_sync_mape=float(sync_err[bound].mean()) if bound.any() else 0.0,
    )


def global_parameters(
    fits: Mapping[str, AppFit],
    gradient_bytes: Mapping[str, int],
    forward_flops: Mapping[str, float],
    *,
    rated_flops: float,
    trusted_apps: Sequence[str],
    overhead_apps: Sequence[str],
) -> dict[str, object]:
    """Cluster-wide parameters for the oracle: medians over applications.

    Bandwidths are implied by ``bandwidth = gradient bytes / s`` for the applications whose
    parameter count is well known (``trusted_apps``); compute efficiency by
    ``3 x forward FLOPs / beta_c / rated_flops`` (forward + 2x backward per sample). The fixed
    per-iteration overhead is the median ``alpha_c`` of ``overhead_apps`` (the apps that stand
    for zoo models; the others carry heavy data pipelines).
    """
    trusted = [app for app in trusted_apps if app in fits]

    def median(values: Sequence[float]) -> float:
        return float(statistics.median(values))

    def implied(app: str, s: float) -> float | None:
        return gradient_bytes[app] / s if s > 1e-4 else None

    inter = [b for app in trusted if (b := implied(app, fits[app].s_inter)) is not None]
    intra = [b for app in trusted if (b := implied(app, fits[app].s_intra)) is not None]
    efficiency = {app: 3.0 * forward_flops[app] / fits[app].beta_c / rated_flops for app in trusted}
    every = list(fits.values())
    return {
        "compute_efficiency": median(list(efficiency.values())),
        "compute_efficiency_by_app": {k: round(v, 3) for k, v in efficiency.items()},
        "iteration_overhead_s": median([fits[app].alpha_c for app in overhead_apps]),
        "overlap_fraction": median([f.overlap for f in every]),
        "overlap_smoothness": median([f.smoothness for f in every]),
        "straggler_fraction": median([f.straggler for f in every]),
        "node_straggler_fraction": median([f.node_straggler for f in every]),
        "unhidden_tail_fraction": median([f.tail for f in every]),
        "nic_sharing": median([f.nic_sharing for f in every]),
        "t4_links": {
            "inter_node_bandwidth": median(inter),
            "intra_node_bandwidth": median(intra),
            "inter_node_latency_s": median([f.lambda_inter for f in every]),
            "intra_node_latency_s": median([f.lambda_intra for f in every]),
        },
        "implied_inter_node_bandwidth_by_app": {
            app: round(b) for app in trusted if (b := implied(app, fits[app].s_inter))
        },
        "implied_intra_node_bandwidth_by_app": {
            app: round(b) for app in trusted if (b := implied(app, fits[app].s_intra))
        },
    }
