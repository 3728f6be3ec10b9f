"""Concurrent sharing (space sharing, as Gavel measured and as CUDA MPS gives): each gang's
iteration time when gangs run on one GPU at the same time.

A pair's rates are predicted from the two jobs' own profiles alone
(:class:`~jigsaw.oracle.gang_timing.SharingProfile` and the iteration time alone), by a linear
model fitted per GPU type on Gavel's measured pairs (``bench/colocation_fit.py`` writes
``jigsaw/data/colocation.json``; docs/SCHEDULER.md, "Co-location"). For job ``j`` next to
``k`` the features are

    1, u_j, u_k, log r_j, log r_k, q_j, q_k, m_j, m_k, log r_j * log r_k, log F_j, log F_k

with ``r = 1 / T_alone`` (iterations per second), ``F`` the FLOPs of one iteration,
``u = F r / rated FLOP/s`` (share of the GPU's peak used alone), ``q`` the memory traffic in
units of 100 GB/s and ``m`` the memory footprint as a share of the GPU's memory. The fitted
fraction ``f_jk`` (shared rate / solo rate) is clipped to ``[FLOOR, 1]``.

On a GPU, job ``j`` is slowed by each other occupant ``k`` in proportion to the share of the
time ``k`` computes there alone (its duty ``d_kg = busy_kg / T_k``: 1 for a full-backprop
one-worker job, less for an SPB partial worker), and slow-downs add:

    s_jg = sum_k d_kg * (1 / f_jk - 1),    T_j = max_g (T_alone_j + busy_jg * s_jg)

so a one-worker full-backprop pair reproduces the fitted ``f_jk`` and an occupant that
computes half the time costs half as much. A gang without a sharing profile (a model the
oracle cannot profile) is paired at ``f = 1/2`` (what time-slicing gives two always-busy jobs).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np

from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.hardware import HardwareSpec
from jigsaw.model.profiles import ModelProfile
from jigsaw.oracle.gang_timing import GangTiming, SharingProfile
from jigsaw.oracle.memory import worker_memory

FEATURES = (
    "1",
    "u_j",
    "u_k",
    "log_r_j",
    "log_r_k",
    "q_j",
    "q_k",
    "m_j",
    "m_k",
    "log_r_j*log_r_k",
    "log_F_j",
    "log_F_k",
)
FLOOR = 0.05
"""Smallest fraction of its solo rate a job keeps next to another (Gavel's lowest measured
non-zero pair fraction is about 0.07)."""
UNKNOWN_PAIR_FRACTION = 0.5
TRAFFIC_UNIT = 1e11
DATA_FILE = "data/colocation.json"
FALLBACK_GPU_TYPE = "v100"


def sharing_profile(
    profile: ModelProfile, batch_size: int, hardware: HardwareSpec
) -> SharingProfile:
    """The job's sharing profile at this per-worker batch on this GPU type: FLOPs from the
    profile, memory as the oracle counts it (one weight version, gradients, SGD momentum,
    saved activations), traffic as reading weights twice, writing gradients and optimizer
    state, and writing and reading back the saved activations."""
    flops = batch_size * sum(
        b.forward_flops_per_sample + b.backward_flops_per_sample for b in profile.blocks
    )
    activations = batch_size * sum(b.activation_bytes_per_sample for b in profile.blocks)
    params = profile.param_bytes
    memory = worker_memory(params, activations).model_bytes
    return SharingProfile(
        flops_per_iteration=float(flops),
        memory_share=memory / hardware.memory_bytes,
        traffic_bytes_per_iteration=float(4 * params + 2 * activations),
    )


def pair_features(
    job: SharingProfile,
    job_alone_s: float,
    other: SharingProfile,
    other_alone_s: float,
    rated_flops: float,
) -> list[float]:
    """The feature vector of :data:`FEATURES` for ``job`` next to ``other``."""
    r_j, r_k = 1.0 / job_alone_s, 1.0 / other_alone_s
    return [
        1.0,
        job.flops_per_iteration * r_j / rated_flops,
        other.flops_per_iteration * r_k / rated_flops,
        math.log(r_j),
        math.log(r_k),
        job.traffic_bytes_per_iteration * r_j / TRAFFIC_UNIT,
        other.traffic_bytes_per_iteration * r_k / TRAFFIC_UNIT,
        job.memory_share,
        other.memory_share,
        math.log(r_j) * math.log(r_k),
        math.log(job.flops_per_iteration),
        math.log(other.flops_per_iteration),
    ]


@dataclass(frozen=True, slots=True)
class ConcurrentFit:
    """Fitted coefficients of one GPU type."""

    gpu_type: str
    coefficients: tuple[float, ...]
    rated_flops: float
    feature_range: tuple[tuple[float, float], ...] = ()
    """Per feature, the lowest and highest value among the measured pairs: a job outside
    them (a model far slower or larger than Gavel's) is predicted at the nearest edge rather
    than extrapolated (empty: no clamping)."""

    def __post_init__(self) -> None:
        if len(self.coefficients) != len(FEATURES):
            raise InvalidSpecError(
                f"co-location fit for {self.gpu_type!r} has {len(self.coefficients)} "
                f"coefficients, expected {len(FEATURES)}"
            )
        if self.feature_range and len(self.feature_range) != len(FEATURES):
            raise InvalidSpecError(
                f"co-location fit for {self.gpu_type!r} has {len(self.feature_range)} "
                f"feature ranges, expected {len(FEATURES)}"
            )

    def pair_fraction(
        self, job: SharingProfile, job_alone_s: float, other: SharingProfile, other_alone_s: float
    ) -> float:
        """``job``'s rate next to ``other`` as a fraction of its solo rate."""
        x = pair_features(job, job_alone_s, other, other_alone_s, self.rated_flops)
        if self.feature_range:
            x = [
                min(max(v, low), high) for v, (low, high) in zip(x, self.feature_range, strict=True)
            ]
        value = sum(c * v for c, v in zip(self.coefficients, x, strict=True))
        return min(max(value, FLOOR), 1.0)


def load_fit(hardware: HardwareSpec, data: Mapping[str, Any] | None = None) -> ConcurrentFit:
    """The fit for ``hardware`` from ``jigsaw/data/colocation.json`` (or ``data``); a GPU type
    Gavel did not measure uses the v100 fit, at its own rated FLOP/s."""
    label = DATA_FILE if data is None else "co-location data"
    if data is None:
        data = json.loads(resources.files("jigsaw").joinpath(DATA_FILE).read_text())
    fits = data.get("gpu_types") if isinstance(data, Mapping) else None
    if not isinstance(fits, Mapping) or FALLBACK_GPU_TYPE not in fits:
        raise InvalidSpecError(f"{label}: expected gpu_types with a {FALLBACK_GPU_TYPE!r} fit")
    name = hardware.name if hardware.name in fits else FALLBACK_GPU_TYPE
    fit = fits[name] if isinstance(fits[name], Mapping) else {}
    coefficients = _numbers(fit.get("coefficients"), f"{label}: gpu_types.{name}.coefficients")
    ranges = fit.get("feature_range", [])
    if not isinstance(ranges, list):
        raise InvalidSpecError(f"{label}: gpu_types.{name}.feature_range must be a list")
    bounds = tuple(
        _pair(_numbers(pair, f"{label}: gpu_types.{name}.feature_range"), label) for pair in ranges
    )
    return ConcurrentFit(name, tuple(coefficients), hardware.rated_flops, bounds)


def _numbers(value: object, where: str) -> list[float]:
    if not isinstance(value, list) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in value
    ):
        raise InvalidSpecError(f"{where} must be a list of finite numbers")
    return [float(v) for v in value]


def _pair(values: list[float], label: str) -> tuple[float, float]:
    if len(values) != 2 or values[0] > values[1]:
        raise InvalidSpecError(f"{label}: a feature range must be [low, high]")
    return values[0], values[1]


def concurrent_iteration_times(
    gangs: Mapping[str, GangTiming], fit: ConcurrentFit
) -> dict[str, float]:
    """Iteration time of every gang in ``gangs`` running concurrently where they share GPUs;
    gangs sharing nothing keep ``alone_s`` exactly."""
    occupants: dict[Any, list[tuple[str, float]]] = {}
    for job_id in sorted(gangs):
        for gpu, busy in gangs[job_id].busy_s:
            occupants.setdefault(gpu, []).append((job_id, busy))
    times = {job_id: timing.alone_s for job_id, timing in gangs.items()}
    for occupied in occupants.values():
        if len(occupied) < 2:
            continue
        for job_id, busy in occupied:
            me = gangs[job_id]
            slowdown = sum(
                _duty(gangs[other], other_busy) * (1.0 / _fraction(fit, me, gangs[other]) - 1.0)
                for other, other_busy in occupied
                if other != job_id
            )
            times[job_id] = max(times[job_id], me.alone_s + busy * slowdown)
    return times


def _duty(timing: GangTiming, busy: float) -> float:
    return min(busy / timing.alone_s, 1.0)


def _fraction(fit: ConcurrentFit, job: GangTiming, other: GangTiming) -> float:
    if job.profile is None or other.profile is None:
        return UNKNOWN_PAIR_FRACTION
    return fit.pair_fraction(job.profile, job.alone_s, other.profile, other.alone_s)


def fit_coefficients(rows: Sequence[tuple[list[float], float]]) -> list[float]:
    """Least-squares coefficients for ``(features, fraction)`` rows (numpy's lstsq)."""
    x = np.array([features for features, _ in rows], dtype=float)
    y = np.array([fraction for _, fraction in rows], dtype=float)
    coefficients, *_ = np.linalg.lstsq(x, y, rcond=None)
    return [float(c) for c in coefficients]
