"""A small Levenberg-Marquardt least-squares solver (numpy only, numeric Jacobian).

The calibration problems are tiny (about ten parameters, a few thousand residuals), so a
dependency on scipy is not worth it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

Vector = NDArray[np.float64]
ResidualFn = Callable[[Vector], Vector]


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
            step = np.linalg.solve(normal + damping * np.diag(np.diag(normal) + 1e-12), -gradient)
            candidate = x + step
            r_new = residuals(candidate)
            cost_new = float(r_new @ r_new)
            if np.isfinite(cost_new) and cost_new < cost:
                improved = cost - cost_new > tolerance * max(cost, 1e-30)
                x, r, cost = candidate, r_new, cost_new
                damping = max(damping / 3.0, 1e-12)
                break
            damping *= 4.0
        if not improved:
            break
    return x


def _numeric_jacobian(residuals: ResidualFn, x: Vector, r: Vector) -> Vector:
    jacobian = np.empty((r.size, x.size))
    for i in range(x.size):
        h = 1e-6 * max(1.0, abs(float(x[i])))
        shifted = x.copy()
        shifted[i] += h
        jacobian[:, i] = (residuals(shifted) - r) / h
    return jacobian
