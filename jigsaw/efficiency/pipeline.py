"""η of a PipeDream-2BW pipeline: what its one-step weight delay costs in progress.

2BW applies W(t+1) = W(t) - lr SGD-momentum(grad f(W(t-1))): the gradient is one update
stale. Data parallelism, GPipe and the hybrid compute grad f(W(t)) over the same global batch
(exact synchronous SGD, η = 1). η_2bw is measured as SPB's is (bench/pipeline_efficiency.py):
iterations data parallelism needs to reach a training loss / iterations the delayed rule needs.

**The effective step against the delayed rule's edge.** Heavy-ball SGD moves the weights by
about lr / (1 - μ) times the gradient per iteration once its momentum has built up, so the
stale gradient is off by about h lr / (1 - μ) of itself, h the curvature along the move:

    x = h lr / (1 - μ)

x = 1 is also the delayed rule's stability edge: on a quadratic mode of curvature h the
delayed iteration z² - (1 + μ) z + (μ + lr h) = 0 is stable only while μ + lr h < 1, against
lr h < 2 (1 + μ) for exact SGD (:func:`spectral_radius`): momentum moves the edge in by
1 / (1 - μ), tenfold at the engines' μ = 0.9.

**η = 1 / (1 + x²).** A step along a direction at angle θ to the true gradient makes cos² θ
of the progress of a step along the gradient (at the best step size for each); a stale
gradient off by x of itself, in a direction unrelated to it, is at cos² θ = 1 / (1 + x²).
So η is about 1 - x² for small effective steps (a delay costs nothing to first order), 1/2 at
the edge, and falls slowly past it: a network does not diverge there as a quadratic would,
it keeps going at a fraction of the pace (measured: η of 0.22-0.25 at x of 1.7-4.8, where
the form says 0.25-0.04).

**h per model.** h is the one fitted constant, per model: the measured η of ``mlp`` and
``digits_cnn`` on a grid of lr and μ each follow the form with their own h (within 0.10 in
16 of 18 settings, 5 of the 6 held out; docs/BENCHMARKS.md "2BW's statistical efficiency"),
and one h for both fits neither (9 of 18). A model without a measurement gets the most
sensitive measured h, so that a pipeline is chosen only when its speed survives the larger
measured cost. Pure: no torch.
"""

from __future__ import annotations

import cmath
import math
from collections.abc import Mapping, Sequence

ENGINE_MOMENTUM = 0.9
"""The momentum every engine trains with (``worker/pipeline/engine.py``'s ``PipelineConfig``,
the SPB and hybrid trainers alike): a job sets its learning rate, not its momentum."""

DELAY_CURVATURE: Mapping[str, float] = {"mlp": 3.489, "digits_cnn": 9.674}
"""h per zoo model, fitted by ``bench/pipeline_efficiency.py --fit`` on the lr 0.01 and 0.05
columns of its grid (every momentum, 3 seeds)."""

DEFAULT_DELAY_CURVATURE = max(DELAY_CURVATURE.values())
"""h for a model without a measurement: the most sensitive measured one."""


def delay_curvature(model: str) -> float:
    """h of ``model``: its measured value, else :data:`DEFAULT_DELAY_CURVATURE`."""
    return DELAY_CURVATURE.get(model, DEFAULT_DELAY_CURVATURE)


def effective_step(lr: float, momentum: float, curvature: float) -> float:
    """x = h lr / (1 - μ): the stale gradient's relative error, and the step against the
    delayed rule's stability edge (1 at the edge)."""
    _check(lr, momentum, curvature)
    return curvature * lr / (1.0 - momentum)


def pipeline_eta(lr: float, momentum: float, curvature: float) -> float:
    """η of the 2BW rule against exact SGD at the same ``lr`` and ``momentum``:
    1 / (1 + x²), x = :func:`effective_step`."""
    x = effective_step(lr, momentum, curvature)
    return 1.0 / (1.0 + x * x)


def model_pipeline_eta(model: str, lr: float, momentum: float = ENGINE_MOMENTUM) -> float:
    """:func:`pipeline_eta` at ``model``'s h (:func:`delay_curvature`)."""
    return pipeline_eta(lr, momentum, delay_curvature(model))


def spectral_radius(lr: float, momentum: float, curvature: float, delay: int) -> float:
    """Per-iteration contraction of heavy-ball SGD on a quadratic mode of curvature
    ``curvature``, with the gradient at W(t) (``delay`` 0) or W(t-1) (``delay`` 1): the
    larger root modulus of z² - (1 + μ - a) z + μ or z² - (1 + μ) z + (μ + a), a = lr h."""
    if delay not in (0, 1):
        raise ValueError(f"delay must be 0 or 1, got {delay}")
    _check(lr, momentum, curvature)
    a = lr * curvature
    b, c = (-(1.0 + momentum - a), momentum) if delay == 0 else (-(1.0 + momentum), momentum + a)
    root = cmath.sqrt(b * b - 4.0 * c)
    return max(abs((-b + root) / 2.0), abs((-b - root) / 2.0))


def fit_curvature(
    measured: Sequence[tuple[float, float, float]], lo: float = 1e-2, hi: float = 1e3
) -> float:
    """The h that minimises the squared error of :func:`pipeline_eta` over
    ``(lr, momentum, eta_measured)`` triples: a log-spaced scan, then golden-section
    refinement around the best point."""
    if not measured:
        raise ValueError("fit_curvature needs at least one measured case")

    def loss(log_h: float) -> float:
        h = math.exp(log_h)
        return sum((pipeline_eta(lr, mu, h) - eta) ** 2 for lr, mu, eta in measured)

    steps = 400
    grid = [math.log(lo) + (math.log(hi) - math.log(lo)) * i / steps for i in range(steps + 1)]
    best = min(range(len(grid)), key=lambda i: loss(grid[i]))
    left, right = grid[max(0, best - 1)], grid[min(steps, best + 1)]
    ratio = (math.sqrt(5.0) - 1.0) / 2.0
    for _ in range(60):
        x1, x2 = right - ratio * (right - left), left + ratio * (right - left)
        if loss(x1) <= loss(x2):
            right = x2
        else:
            left = x1
    return math.exp((left + right) / 2.0)


def _check(lr: float, momentum: float, curvature: float) -> None:
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr}")
    if not 0.0 <= momentum < 1.0:
        raise ValueError(f"momentum must be in [0, 1), got {momentum}")
    if not curvature > 0:
        raise ValueError(f"curvature must be > 0, got {curvature}")
