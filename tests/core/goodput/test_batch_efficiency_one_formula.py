"""Batch-size efficiency has one formula (jigsaw.efficiency.model): the goodput model's
:meth:`GradientNoise.efficiency` and the eta module's :func:`batch_size_efficiency` agree on
random statistics, including the edges (no signal, no noise)."""

from __future__ import annotations

import numpy as np
import pytest

from jigsaw.efficiency.model import batch_size_efficiency
from jigsaw.goodput import GradientNoise


def test_the_two_entry_points_agree_on_random_statistics() -> None:
    rng = np.random.default_rng(29)
    for _ in range(500):
        grad_sqr = float(rng.choice([0.0, -1e-3, *rng.lognormal(0.0, 3.0, 4)]))
        grad_var = float(rng.choice([0.0, *rng.lognormal(0.0, 3.0, 4)]))
        reference = float(rng.integers(1, 4096))
        batches = rng.uniform(1.0, 65536.0, 7)
        noise = GradientNoise.at_batch(grad_sqr, grad_var, reference)
        vector = noise.efficiency(batches, reference)
        scalar = [batch_size_efficiency(grad_sqr, grad_var, b / reference) for b in batches]
        assert vector == pytest.approx(scalar, rel=1e-9, abs=1e-12)
