"""A small Levenberg-Marquardt least-squares solver (numpy only, numeric Jacobian).

The calibration problems are tiny (about ten parameters, a few thousand residuals), so a
dependency on scipy is not worth it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from jigsaw.model.numerics import ROUNDOFF

Vector = NDArray[np.float64]
ResidualFn = Callable[[Vector], Vector]

_MIN_DAMPING = ROUNDOFF
"""Damping never falls below this, and the normal matrix's diagonal is lifted by it, so a
parameter the residuals ignore leaves the step solvable."""
_RELATIVE_STEP = 1e-6
"""The numeric Jacobian's step, relative to the parameter (at least this, absolute)."""


def least_squares(
    residuals: ResidualFn,
    start: Vector,
    *,
    max_iterations: int = 200,
    tolerance: float = 1e-10,
) -> Vector:
    """Minimise ``sum(residuals(x)**2)`` from ``start``; returns the best ``x`` found."""
    x = np.asarray(start, dtype=np.float64).copy()
    r = residuals(x)
    cost = float(r @ r)
    damping = 1e-3
    for _ in range(max_iterations):
        jacobian = _numeric_jacobian(residuals, x, r)
        gradient = jacobian.T @ r
        normal = jacobian.T @ jacobian
        improved = False
        while damping < 1e12:
            lifted = np.diag(np.diag(normal) + _MIN_DAMPING)
            step = np.linalg.solve(normal + damping * lifted, -gradient)
            candidate = x + step
            r_new = residuals(candidate)
            cost_new = float(r_new @ r_new)
            if np.isfinite(cost_new) and cost_new < cost:
                improved = cost - cost_new > tolerance * max(cost, 1e-30)
                x, r, cost = candidate, r_new, cost_new
                damping = max(damping / 3.0, _MIN_DAMPING)
                break
            damping *= 4.0
        if not improved:
            break
    return x


def _numeric_jacobian(residuals: ResidualFn, x: Vector, r: Vector) -> Vector:
    jacobian = np.empty((r.size, x.size))
    for i in range(x.size):
        h = _RELATIVE_STEP * max(1.0, abs(float(x[i])))
        shifted = x.copy()
        shifted[i] += h
        jacobian[:, i] = (residuals(shifted) - r) / h
    return jacobian
