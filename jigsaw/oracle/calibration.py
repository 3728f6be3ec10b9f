"""Fit the oracle's compute/network model to the Pollux step- and sync-time measurements.

Each row of ``pollux/apps/<app>/{placements,scalability}.csv`` is one configuration (nodes,
replicas, GPUs per node, local batch ``m``) with the measured seconds per iteration
(``step_time``) and the part of it spent waiting for the gradient all-reduce after backward
(``sync_time``). The model, per application (docs/ORACLE.md, "Calibration"):

    compute(m, g) = (alpha_c + beta_c m) (1 + kappa (g - 1))     g = GPUs on the busiest node
    s_link        = s_intra                     on one node
                  = s_inter (1 + nic_sharing (g - 1))   across nodes (g GPUs share one NIC)
    ring(k)       = 2 (k-1) lambda_link + 2 (k-1)/k s_link       k replicas, ring all-reduce
    exposed       = softplus(ring - overlap compute; width smoothness ring)
    sync          = floor + exposed + straggler compute [k > 1]
    step          = compute + sync

``s`` is gradient bytes / effective bandwidth and ``lambda`` the per-step latency. The
all-reduce hides behind the ``overlap`` fraction of compute (backward); only the rest is
exposed. ``straggler`` is the wait for the slowest replica, ``floor`` the sync time that a
single replica already reports. Fitting minimises log-ratio errors of step and sync time.

This is the oracle's hardware calibration, run offline (``bench/oracle_calibration.py``
writes the medians over applications to ``jigsaw/data/calibration.json``); it is not a job's
step-time model. A job's step times come from the one step-time model,
:mod:`jigsaw.goodput.step_time`, fitted to what the job measured, with the oracle calibrated
here as its prior (:mod:`jigsaw.goodput.prior`).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from jigsaw.model.errors import TraceFormatError
from jigsaw.oracle.fitting import least_squares

Array = NDArray[np.float64]

PARAMETER_NAMES = (
    "alpha_c",
    "beta_c",
    "kappa",
    "lambda_intra",
    "s_intra",
    "lambda_inter",
    "s_inter",
    "nic_sharing",
    "overlap",
    "smoothness",
    "straggler",
    "node_straggler",
    "tail",
    "floor",
)


@dataclass(frozen=True, slots=True)
class Measurement:
    app: str
    placement: str
    """Per-node GPU counts such as ``"1222"``; scalability rows read ``"n6r8"``."""
    num_nodes: int
    num_replicas: int
    max_gpus_per_node: int
    local_bsz: int
    step_time: float
    sync_time: float


@dataclass(frozen=True, slots=True)
class AppFit:
    """Fitted parameters of one application (seconds; ``gamma = 1 + gamma_minus_1``)."""

    alpha_c: float
    beta_c: float
    kappa: float
    lambda_intra: float
    s_intra: float
    lambda_inter: float
    s_inter: float
    nic_sharing: float
    overlap: float
    smoothness: float
    straggler: float
    node_straggler: float
    tail: float
    floor: float

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def load_app(app_dir: Path) -> list[Measurement]:
    """Both CSV files of one Pollux application, as measurements."""
    app = app_dir.name
    rows: list[Measurement] = []
    for line, record in _read_csv(
        app_dir / "placements.csv", ("placement", "local_bsz", "step_time", "sync_time")
    ):
        path = str(app_dir / "placements.csv")
        placement = record["placement"].strip()
        if not placement.isdigit() or "0" in placement:
            raise TraceFormatError(path, line, f"placement {placement!r} is not per-node counts")
        counts = [int(c) for c in placement]
        rows.append(
            Measurement(
                app,
                placement,
                len(counts),
                sum(counts),
                max(counts),
                _int(record, "local_bsz", path, line),
                _float(record, "step_time", path, line),
                _float(record, "sync_time", path, line),
            )
        )
    for line, record in _read_csv(
        app_dir / "scalability.csv",
        ("num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time"),
    ):
        path = str(app_dir / "scalability.csv")
        nodes = _int(record, "num_nodes", path, line)
        replicas = _int(record, "num_replicas", path, line)
        if not 1 <= nodes <= replicas:
            raise TraceFormatError(path, line, "need 1 <= num_nodes <= num_replicas")
        rows.append(
            Measurement(
                app,
                f"n{nodes}r{replicas}",
                nodes,
                replicas,
                math.ceil(replicas / nodes),
                _int(record, "local_bsz", path, line),
                _float(record, "step_time", path, line),
                _float(record, "sync_time", path, line),
            )
        )
    return rows


def predict(fit: AppFit, rows: Sequence[Measurement]) -> tuple[Array, Array]:
    """Predicted (step_time, sync_time) for each row."""
    return _predict_arrays(_params_vector(fit), _columns(rows))


def fit_app(rows: Sequence[Measurement]) -> AppFit:
    """Least squares on log(step) and log(sync), i.e. on relative errors."""
    columns = _columns(rows)
    step = columns["step"]
    sync = columns["sync"]
    start = _initial_guess(columns)

    def residuals(free: Array) -> Array:
        with np.errstate(all="ignore"):  # a rejected trial step may overflow; LM skips it
            pred_step, pred_sync = _predict_arrays(_from_free(free), columns)
            return np.concatenate(
                [
                    np.log(np.maximum(pred_step, 1e-12) / step),
                    np.log(np.maximum(pred_sync, 1e-12) / sync),
                ]
            )

    best = _from_free(least_squares(residuals, _to_free(start)))
    return AppFit(*(float(v) for v in best))


# Bounded parameters: (low, high) through a logistic map; the rest are positive (log map).
_BOUNDS: dict[int, tuple[float, float]] = {
    PARAMETER_NAMES.index("overlap"): (0.0, 1.0),
    PARAMETER_NAMES.index("smoothness"): (0.02, 1.0),
    PARAMETER_NAMES.index("kappa"): (0.0, 0.5),
    PARAMETER_NAMES.index("nic_sharing"): (0.0, 1.0),
    PARAMETER_NAMES.index("straggler"): (0.0, 0.5),
    PARAMETER_NAMES.index("node_straggler"): (0.0, 0.5),
    PARAMETER_NAMES.index("tail"): (0.0, 0.5),
}


def _from_free(free: Array) -> Array:
    params = np.exp(np.clip(free, -40.0, 40.0))
    for index, (low, high) in _BOUNDS.items():
        params[index] = low + (high - low) / (1.0 + np.exp(-np.clip(free[index], -40.0, 40.0)))
    return params


def _to_free(params: Array) -> Array:
    free = np.log(np.maximum(params, 1e-30))
    for index, (low, high) in _BOUNDS.items():
        fraction = np.clip((params[index] - low) / (high - low), 1e-6, 1 - 1e-6)
        free[index] = np.log(fraction / (1.0 - fraction))
    return free


def _initial_guess(columns: dict[str, Array]) -> Array:
    single = columns["replicas"] == 1
    m = columns["bsz"][single]
    compute = (columns["step"] - columns["sync"])[single]
    if m.size >= 2 and np.ptp(m) > 0:
        beta, alpha = np.polyfit(m, compute, 1)
    else:
        beta, alpha = float(np.median(columns["step"])) / 64.0, 0.01
    floor = float(np.median(columns["sync"][single])) if single.any() else 1e-4
    sync_scale = float(np.median(columns["sync"])) + 1e-4
    return np.array(
        [
            max(alpha, 1e-4),
            max(beta, 1e-7),
            0.02,
            1e-4,
            sync_scale / 4,
            1e-3,
            sync_scale,
            0.1,
            0.5,
            0.2,
            0.02,
            0.01,
            0.05,
            max(floor, 1e-5),
        ]
    )


def _params_vector(fit: AppFit) -> Array:
    return np.array([getattr(fit, name) for name in PARAMETER_NAMES])


def _columns(rows: Sequence[Measurement]) -> dict[str, Array]:
    return {
        "nodes": np.array([r.num_nodes for r in rows], dtype=np.float64),
        "replicas": np.array([r.num_replicas for r in rows], dtype=np.float64),
        "per_node": np.array([r.max_gpus_per_node for r in rows], dtype=np.float64),
        "bsz": np.array([r.local_bsz for r in rows], dtype=np.float64),
        "step": np.array([r.step_time for r in rows], dtype=np.float64),
        "sync": np.array([r.sync_time for r in rows], dtype=np.float64),
    }


def _predict_arrays(params: Array, columns: dict[str, Array]) -> tuple[Array, Array]:
    (
        alpha_c,
        beta_c,
        kappa,
        lam_r,
        s_r,
        lam_n,
        s_n,
        nic_sharing,
        overlap,
        smoothness,
        straggler,
        node_straggler,
        tail,
        floor,
    ) = params
    k = columns["replicas"]
    per_node = columns["per_node"]
    compute = (alpha_c + beta_c * columns["bsz"]) * (1.0 + kappa * (per_node - 1.0))
    multi_node = columns["nodes"] > 1
    lam = np.where(multi_node, lam_n, lam_r)
    s = np.where(multi_node, s_n * (1.0 + nic_sharing * (per_node - 1.0)), s_r)
    ring = np.where(k > 1, 2.0 * (k - 1.0) * lam + 2.0 * (k - 1.0) / k * s, 0.0)
    hideable = (1.0 - tail) * ring
    exposed = tail * ring + _softplus(hideable - overlap * compute, smoothness * hideable + 1e-9)
    wait = compute * (np.where(k > 1, straggler, 0.0) + node_straggler * (per_node - 1.0))
    sync = floor + exposed + wait
    return compute + sync, sync


def _softplus(x: Array, width: Array) -> Array:
    """A smooth max(x, 0) whose corner has the given width."""
    z = x / width
    result: Array = width * (np.maximum(z, 0.0) + np.log1p(np.exp(-np.abs(z))))
    return result


def _read_csv(path: Path, required: tuple[str, ...]) -> list[tuple[int, dict[str, str]]]:
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in required if c not in (reader.fieldnames or [])]
        if missing:
            raise TraceFormatError(str(path), 1, f"missing columns {', '.join(missing)}")
        return [(index + 2, row) for index, row in enumerate(reader)]


def _int(record: dict[str, str], key: str, path: str, line: int) -> int:
    try:
        value = int(record[key])
    except (TypeError, ValueError):
        raise TraceFormatError(
            path, line, f"{key} must be an integer, got {record[key]!r}"
        ) from None
    if value < 1:
        raise TraceFormatError(path, line, f"{key} must be >= 1, got {value}")
    return value


def _float(record: dict[str, str], key: str, path: str, line: int) -> float:
    try:
        value = float(record[key])
    except (TypeError, ValueError):
        raise TraceFormatError(path, line, f"{key} must be a number, got {record[key]!r}") from None
    if not value > 0 or not math.isfinite(value):
        raise TraceFormatError(path, line, f"{key} must be a positive number, got {value}")
    return value
