"""The learning rate of an adaptive batch against hand-computed values: AdaScale's gain for
SGD from the job's gradient statistics, the square-root rule for Adam and AdamW."""

from __future__ import annotations

import math

import pytest

from jigsaw.efficiency.lr_scaling import adascale_gain, scaled_learning_rate
from jigsaw.model.block_noise import BlockNoise


def noise(grad_sqr: float, grad_var: float, batch: int = 16) -> BlockNoise:
    return BlockNoise(1, grad_sqr, grad_var, batch, 20, 100, 2)


def test_adascale_gain_by_hand() -> None:
    # Per-sample variance 2.0 x 16 = 32; at the base batch 32 the variance is 1.0; |G|^2 = 1.
    stats = [noise(1.0, 2.0)]
    assert adascale_gain(2.0, stats, 32) == pytest.approx((1 + 1) / (1 / 2 + 1))  # 4/3
    assert adascale_gain(1.0, stats, 32) == pytest.approx(1.0)
    # Blocks add: two blocks as the one above give the same gain.
    assert adascale_gain(2.0, stats * 2, 32) == pytest.approx(4 / 3)


def test_the_gain_lies_between_no_gain_and_the_linear_rule() -> None:
    assert adascale_gain(4.0, [noise(1e-12, 5.0)], 16) == pytest.approx(4.0, rel=1e-6)
    assert adascale_gain(4.0, [noise(5.0, 1e-12)], 16) == pytest.approx(1.0, rel=1e-6)
    assert adascale_gain(0.5, [noise(1.0, 2.0)], 32) == pytest.approx(2 / 3)  # smaller batch
    assert adascale_gain(3.0, [], 32) == 1.0  # no statistics: the tuned rate


def test_rules_by_optimizer() -> None:
    stats = [noise(1.0, 2.0)]
    assert scaled_learning_rate(0.1, 32, 64, "sgd", stats) == pytest.approx(0.1 * 4 / 3)
    assert scaled_learning_rate(0.1, 32, 128, "adamw") == pytest.approx(0.2)
    assert scaled_learning_rate(0.1, 32, 8, "adam") == pytest.approx(0.05)
    assert scaled_learning_rate(0.1, 32, 32, "sgd", stats) == 0.1
    assert math.isclose(scaled_learning_rate(0.1, 32, 64, "sgd"), 0.1)
    with pytest.raises(ValueError, match="rmsprop"):
        scaled_learning_rate(0.1, 32, 64, "rmsprop")
