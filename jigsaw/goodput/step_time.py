"""Seconds per iteration of a data-parallel job on any (nodes, replicas, micro-batch) shape.

The model (Pollux, OSDI 2021, section 3.2; written from the paper's description):

    compute(m)      = alpha_c + beta_c m                    one micro-batch of m samples
    network(n, r)   = alpha_n + beta_n max(r - 2, 0)        across nodes        (n > 1)
                    = alpha_r + beta_r max(r - 2, 0)        within one node     (n = 1, r > 1)
                    = 0                                     one replica
    step(n, r, m)   = (compute^gamma + network^gamma)^(1/gamma)    the synchronising pass
    iteration       = accum x compute(m) + step(n, r, m)            with ``accum`` extra
                                                                    micro-batches first

``gamma`` in [1, 10] says how well the all-reduce hides behind backward (1: not at all, 10:
almost entirely). :func:`fit_step_times` fits the seven numbers to measured (step, sync)
times in log space. With few measurements (a job that has run on one shape only), the
parameters the data cannot tell apart are held at optimistic values: a job that never ran
across nodes is assumed to pay no more there than within a node, so a policy dares to try.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import astuple, dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from jigsaw.oracle.fitting import least_squares

Array = NDArray[np.float64]

FLOOR_S = 1e-8
"""Lower bound of every time parameter (seconds): keeps logs finite."""
MAX_OVERLAP = 10.0


@dataclass(frozen=True, slots=True)
class StepTimeModel:
    compute_s: float
    """``alpha_c``: a micro-batch's fixed compute."""
    compute_per_sample_s: float
    """``beta_c``: compute per sample of a micro-batch."""
    inter_node_s: float
    """``alpha_n``: the all-reduce across nodes."""
    inter_node_per_replica_s: float
    """``beta_n``: what each replica beyond two adds across nodes."""
    intra_node_s: float
    """``alpha_r``: the all-reduce within one node."""
    intra_node_per_replica_s: float
    """``beta_r``: what each replica beyond two adds within one node."""
    overlap: float
    """``gamma`` in [1, 10]: how much of the all-reduce hides behind compute."""

    def __post_init__(self) -> None:
        values = astuple(self)
        if not all(math.isfinite(v) and v > 0 for v in values):
            raise ValueError(f"step-time parameters must be positive and finite: {self}")
        if not 1.0 <= self.overlap <= MAX_OVERLAP:
            raise ValueError(f"overlap must be in [1, {MAX_OVERLAP}], got {self.overlap}")

    def micro_batch_s(self, atomic_bsz: ArrayLike) -> Array:
        result: Array = self.compute_s + self.compute_per_sample_s * np.asarray(
            atomic_bsz, dtype=np.float64
        )
        return result

    def network_s(self, nodes: ArrayLike, replicas: ArrayLike) -> Array:
        n = np.asarray(nodes, dtype=np.float64)
        r = np.asarray(replicas, dtype=np.float64)
        beyond_two = np.maximum(r - 2.0, 0.0)
        across = self.inter_node_s + self.inter_node_per_replica_s * beyond_two
        within = self.intra_node_s + self.intra_node_per_replica_s * beyond_two
        result: Array = np.where(n > 1, across, np.where(r > 1, within, 0.0))
        return result

    def step_s(self, nodes: ArrayLike, replicas: ArrayLike, atomic_bsz: ArrayLike) -> Array:
        """The synchronising pass: the last micro-batch's compute and the all-reduce."""
        gamma = self.overlap
        compute = self.micro_batch_s(atomic_bsz)
        network = self.network_s(nodes, replicas)
        result: Array = (compute**gamma + network**gamma) ** (1.0 / gamma)
        return result

    def iteration_s(
        self, nodes: ArrayLike, replicas: ArrayLike, atomic_bsz: ArrayLike, accum: ArrayLike
    ) -> Array:
        """One optimizer step: ``accum`` micro-batches without synchronisation, then one with."""
        extra = np.asarray(accum, dtype=np.float64) * self.micro_batch_s(atomic_bsz)
        result: Array = extra + self.step_s(nodes, replicas, atomic_bsz)
        return result


@dataclass(frozen=True, slots=True)
class StepObservation:
    """One measured shape: seconds of the synchronising pass (``step_s``) and the part of it
    spent waiting for the all-reduce after backward (``sync_s``)."""

    nodes: int
    replicas: int
    atomic_bsz: float
    step_s: float
    sync_s: float

    def __post_init__(self) -> None:
        if not 1 <= self.nodes <= self.replicas:
            raise ValueError(f"need 1 <= nodes <= replicas, got {self}")
        if not (self.atomic_bsz > 0 and self.step_s > 0 and 0 <= self.sync_s < self.step_s):
            raise ValueError(f"need a positive batch and 0 <= sync < step, got {self}")


_NAMES = tuple(StepTimeModel.__dataclass_fields__)
_ALPHA_C, _BETA_C, _ALPHA_N, _BETA_N, _ALPHA_R, _BETA_R, _GAMMA = range(7)
_START = np.array([1e-1, 1e-2, 1e-1, 1e-2, 1e-1, 1e-2, 1.0 + 1e-3])
_OVERLAP_PRIOR = math.sqrt(1e-3)
"""Weight of the pull of gamma towards 1 (a smaller gamma fits the other numbers better)."""
_RETROGRESSION_PRIOR = 0.1
"""Weight of the pull of each ``beta / alpha`` towards 0 (prefer the optimistic model)."""


def fit_step_times(observations: Sequence[StepObservation]) -> StepTimeModel:
    """Least log-error fit of the seven parameters to ``observations``. Parameters the
    observations cannot determine are held (see the module docstring)."""
    if not observations:
        raise ValueError("fitting step times needs at least one observation")
    nodes = np.array([o.nodes for o in observations], dtype=np.float64)
    replicas = np.array([o.replicas for o in observations], dtype=np.float64)
    atomic = np.array([o.atomic_bsz for o in observations], dtype=np.float64)
    step = np.array([o.step_s for o in observations], dtype=np.float64)
    compute = np.maximum(step - np.array([o.sync_s for o in observations]), 1e-6 * step)
    start, held = _initial_guess(nodes, replicas, atomic, step, compute), set[int]()
    if np.unique(atomic).size == 1:
        # One micro-batch size cannot split fixed from per-sample compute: half and half.
        start[_ALPHA_C] = float(np.mean(compute)) / 2
        held.add(_ALPHA_C)
    multi_node = bool(np.any(nodes > 1))
    if not multi_node:
        start[[_ALPHA_N, _BETA_N]] = FLOOR_S
        held |= {_ALPHA_N, _BETA_N}
    if not np.any((nodes == 1) & (replicas > 1)):
        start[[_ALPHA_R, _BETA_R]] = FLOOR_S
        held |= {_ALPHA_R, _BETA_R}
    if not np.any(replicas > 2):
        start[[_BETA_N, _BETA_R]] = FLOOR_S
        held |= {_BETA_N, _BETA_R}
    free = [i for i in range(7) if i not in held]
    scale = 1.0 / math.sqrt(len(observations))

    def params_of(x: Array) -> Array:
        params = start.copy()
        for value, index in zip(x, free, strict=True):
            params[index] = _from_free(index, value)
        return params

    def residuals(x: Array) -> Array:
        p = params_of(x)
        with np.errstate(all="ignore"):  # a rejected trial step may overflow; LM skips it
            model = _unchecked(p)
            predicted_compute = model.micro_batch_s(atomic)
            predicted_step = model.step_s(nodes, replicas, atomic)
            return np.concatenate(
                [
                    scale * np.log(predicted_compute / compute),
                    scale * np.log(predicted_step / step),
                    [
                        _OVERLAP_PRIOR * (p[_GAMMA] - 1.0),
                        _RETROGRESSION_PRIOR * p[_BETA_N] / p[_ALPHA_N],
                        _RETROGRESSION_PRIOR * p[_BETA_R] / p[_ALPHA_R],
                    ],
                ]
            )

    x0 = np.array([_to_free(i, start[i]) for i in free])
    fitted = params_of(least_squares(residuals, x0)) if free else start
    if not multi_node:
        # Never measured across nodes: assume it costs a little more than within one.
        fitted[_ALPHA_N] = max(fitted[_ALPHA_N], 1.1 * fitted[_ALPHA_R])
        fitted[_BETA_N] = max(fitted[_BETA_N], 1.1 * fitted[_BETA_R])
    return StepTimeModel(*(float(v) for v in fitted))


def _initial_guess(
    nodes: Array, replicas: Array, atomic: Array, step: Array, compute: Array
) -> Array:
    """Pollux's generic start, moved to the data's scale where it says something: compute
    from a line through (micro-batch, compute), networks from the measured waits."""
    start = _START.copy()
    if np.unique(atomic).size > 1:
        beta, alpha = np.polyfit(atomic, compute, 1)
        start[_BETA_C] = max(float(beta), 1e-6)
        start[_ALPHA_C] = max(float(alpha), 1e-2 * float(np.min(compute)))
    wait = step - compute
    for where, base, per_replica in (
        (nodes > 1, _ALPHA_N, _BETA_N),
        ((nodes == 1) & (replicas > 1), _ALPHA_R, _BETA_R),
    ):
        if np.any(where):
            start[base] = max(float(np.median(wait[where])), 1e-6)
            start[per_replica] = start[base] / 100
    return start


def _unchecked(params: Array) -> StepTimeModel:
    """A model from trial parameters, without the range checks (the fit's inner loop)."""
    model = object.__new__(StepTimeModel)
    for name, value in zip(_NAMES, params, strict=True):
        object.__setattr__(model, name, value)
    return model


def _from_free(index: int, value: float) -> float:
    clipped = min(max(value, -40.0), 40.0)
    if index == _GAMMA:
        return 1.0 + (MAX_OVERLAP - 1.0) / (1.0 + math.exp(-clipped))
    return FLOOR_S + math.exp(clipped)


def _to_free(index: int, value: float) -> float:
    if index == _GAMMA:
        fraction = min(max((value - 1.0) / (MAX_OVERLAP - 1.0), 1e-6), 1 - 1e-6)
        return math.log(fraction / (1.0 - fraction))
    return math.log(max(value - FLOOR_S, 1e-30))
