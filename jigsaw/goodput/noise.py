"""Batch-size efficiency from gradient-noise statistics.

With ``|G|^2`` the squared norm of the true gradient and ``S`` the trace of the per-sample
gradient covariance, one iteration at global batch ``B`` makes as much progress as
``(phi / M + 1) / (phi / B + 1)`` iterations at a reference batch ``M``, where
``phi = S / |G|^2`` is the gradient noise scale (McCandlish et al. 2018's ``B_simple``).
Per sample that is the efficiency

    E(B) = (phi + M) / (phi + B)       (1 at B = M, falling towards M / B as B >> phi)

which is Pollux's ``(var + sqr) / (var / s + sqr) / s`` with ``s = B / M`` and ``var = S / M``.
The formula is written once, in :func:`jigsaw.efficiency.model.batch_size_efficiencies` (the
lower floor, beside SPB's eta from the same statistics); this class calls it. Goodput
comparisons between batches never depend on ``M``: it scales every ``E`` alike.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from jigsaw.efficiency.model import batch_size_efficiencies
from jigsaw.model.block_noise import BlockNoise


@dataclass(frozen=True, slots=True)
class GradientNoise:
    """A job's whole-model gradient statistics: ``grad_sqr`` = ``|G|^2`` and ``sample_var`` =
    the trace of the per-sample gradient covariance (the variance of a batch-``b`` gradient
    is ``sample_var / b``)."""

    grad_sqr: float
    sample_var: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.grad_sqr) and math.isfinite(self.sample_var)):
            raise ValueError(f"gradient statistics must be finite, got {self}")
        if self.sample_var < 0:
            raise ValueError(f"a variance cannot be negative, got {self.sample_var}")

    @classmethod
    def at_batch(cls, grad_sqr: float, grad_var: float, batch: float) -> GradientNoise:
        """From the variance of a batch-``batch`` gradient (how workers and Pollux's
        validation curves report it)."""
        return cls(grad_sqr, grad_var * batch)

    @classmethod
    def of_blocks(cls, blocks: Sequence[BlockNoise]) -> GradientNoise | None:
        """The whole model's statistics from per-block reports (norms and variances add over
        disjoint parameter blocks); ``None`` when there are none."""
        if not blocks:
            return None
        return cls(
            math.fsum(b.grad_sqr for b in blocks),
            math.fsum(b.grad_var * b.batch for b in blocks),
        )

    @property
    def noise_scale(self) -> float:
        """``phi = S / |G|^2`` in samples; infinite when the gradient estimate is not
        positive (all noise: batches scale perfectly)."""
        return self.sample_var / self.grad_sqr if self.grad_sqr > 0 else math.inf

    def efficiency(self, batch: ArrayLike, reference: float) -> NDArray[np.float64]:
        """Progress per sample at global ``batch`` relative to ``reference`` samples: Pollux's
        formula, written once in :func:`jigsaw.efficiency.model.batch_size_efficiencies`
        (``var`` is the variance of a ``reference``-sample gradient)."""
        sizes = np.asarray(batch, dtype=np.float64)
        var = self.sample_var / reference
        return batch_size_efficiencies(self.grad_sqr, var, sizes / reference)
