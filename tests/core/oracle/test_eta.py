"""The gradient-noise estimator and the eta model of the pure core."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from jigsaw.efficiency.model import (
    DEFAULT,
    MEASURED_TABLE,
    ONLINE,
    OnlineEta,
    batch_size_efficiency,
    block_efficiency,
    eta_for_plan,
    prior_from_table,
)
from jigsaw.efficiency.table import EfficiencyMeasurement, EfficiencyTable
from jigsaw.model.block_noise import (
    BlockNoise,
    InvalidNoiseStatisticsError,
    parse_block_noise,
    two_batch_estimate,
    validate_block_noise,
)
from jigsaw.model.plan import SPBPlan, full_backprop, resolve_plan


def _noise(sqr_var: list[tuple[float, float]], batch: int = 8) -> tuple[BlockNoise, ...]:
    return tuple(
        BlockNoise(b, sqr, var, batch, observations=50, last_iteration=99, contributors=4)
        for b, (sqr, var) in enumerate(sqr_var, start=1)
    )


def test_two_batch_estimator_is_unbiased_on_synthetic_gradients_with_known_noise() -> None:
    rng = np.random.default_rng(0)
    dim, batch, contributors, trials = 40, 8, 3, 4000
    true_gradient = rng.normal(0.0, 0.15, dim)
    sigma = 0.5  # per-sample noise per coordinate: tr(Sigma) = dim * sigma^2
    true_sqr = float(true_gradient @ true_gradient)
    true_var = dim * sigma**2 / batch  # variance of one contributor's batch-8 gradient
    sqr_estimates, var_estimates, naive = [], [], []
    for _ in range(trials):
        samples = true_gradient + rng.normal(0.0, sigma, (contributors, batch, dim))
        local = samples.mean(axis=1)  # each contributor's minibatch gradient
        mean = local.mean(axis=0)
        local_sqr = float(np.mean(np.sum(local**2, axis=1)))
        total_sqr = float(mean @ mean)
        grad_sqr, grad_var = two_batch_estimate(total_sqr, local_sqr, contributors)
        sqr_estimates.append(grad_sqr)
        var_estimates.append(grad_var)
        naive.append(total_sqr)
    for estimates, truth in ((sqr_estimates, true_sqr), (var_estimates, true_var)):
        standard_error = np.std(estimates) / math.sqrt(trials)
        assert abs(np.mean(estimates) - truth) < 4 * standard_error, (np.mean(estimates), truth)
    # The plain squared norm of the averaged gradient is biased upward by var / n: the test
    # above would catch an estimator that forgot the correction.
    naive_error = np.std(naive) / math.sqrt(trials)
    assert np.mean(naive) - true_sqr > 10 * naive_error
    assert np.mean(naive) == pytest.approx(true_sqr + true_var / contributors, rel=0.05)


def test_estimator_needs_two_contributors() -> None:
    with pytest.raises(ValueError, match="two contributors"):
        two_batch_estimate(1.0, 1.0, 1)


def test_eta_is_one_for_full_backprop() -> None:
    stats = _noise([(0.1, 5.0), (0.2, 3.0), (0.05, 9.0), (1.0, 1.0)])
    estimate = eta_for_plan(stats, full_backprop(4, 4))
    assert estimate.eta == 1.0


def test_eta_is_monotone_in_depth_for_every_plan() -> None:
    stats = _noise([(0.1, 5.0), (0.2, 3.0), (0.05, 9.0), (1.0, 1.0)])
    plans = [
        SPBPlan(depths, 4) for depths in itertools.product(range(4), repeat=4) if min(depths) == 0
    ]
    eta = {plan.depths: eta_for_plan(stats, plan).eta for plan in plans}
    for depths, value in eta.items():
        for rank in range(4):
            if depths[rank] < 3:
                deeper = list(depths)
                deeper[rank] += 1
                if min(deeper) != 0:
                    continue  # not a plan: block 1 would be untrained
                # Every block keeps a noisy gradient here, so a deeper stop strictly costs.
                assert eta[tuple(deeper)] < value, (depths, deeper)
    # Bounds: between the smallest contributor share and 1.
    for plan in plans:
        lowest = min(len(plan.contributors(b)) for b in range(1, 5)) / 4
        assert lowest <= eta[plan.depths] <= 1.0


def test_eta_weights_blocks_by_their_share_not_a_plain_mean() -> None:
    staircase = resolve_plan("staircase", 4, 4)
    # Block 1 (one contributor under the staircase) noisy vs. quiet, everything else equal.
    noisy_input = eta_for_plan(_noise([(0.1, 40.0), (0.1, 1.0), (0.1, 1.0), (0.1, 1.0)]), staircase)
    quiet_input = eta_for_plan(_noise([(0.1, 0.01), (0.1, 1.0), (0.1, 1.0), (0.1, 1.0)]), staircase)
    # By hand: (S + sum var/N) / (S + sum var/|C_b|) with S = 0.4.
    assert noisy_input.eta == pytest.approx((0.4 + 43 / 4) / (0.4 + 40 + 1 / 2 + 1 / 3 + 1 / 4))
    assert quiet_input.eta == pytest.approx((0.4 + 3.01 / 4) / (0.4 + 0.01 + 1 / 2 + 1 / 3 + 1 / 4))
    # A plain mean of the per-block efficiencies would hide the noisy block: 0.66 vs 0.27.
    plain = np.mean(
        [
            block_efficiency(0.1, var, len(staircase.contributors(b)), 4)
            for b, var in zip((1, 2, 3, 4), (40.0, 1.0, 1.0, 1.0), strict=True)
        ]
    )
    assert plain > 0.6 > 0.3 > noisy_input.eta
    # Noise-free gradients: a smaller batch costs nothing.
    assert eta_for_plan(_noise([(1.0, 0.0)] * 4), staircase).eta == 1.0
    # Pure noise in one block: progress is that block's contributor share, in harmonic mean.
    per_block = [block_efficiency(0.0, 1.0, len(staircase.contributors(b)), 4) for b in (1, 2)]
    assert per_block == [0.25, 0.5]


def test_variance_is_rescaled_to_the_candidate_batch() -> None:
    staircase = resolve_plan("staircase", 4, 4)
    at_8 = _noise([(0.1, 4.0)] * 4, batch=8)
    same_at_16 = _noise([(0.1, 2.0)] * 4, batch=16)
    assert eta_for_plan(at_8, staircase, batch=16).eta == pytest.approx(
        eta_for_plan(same_at_16, staircase).eta
    )


def test_batch_size_efficiency_is_pollux_formula() -> None:
    assert batch_size_efficiency(0.3, 2.0, 1.0) == pytest.approx(1.0)
    assert batch_size_efficiency(0.3, 2.0, 4.0) == pytest.approx((2.0 + 0.3) / (0.5 + 0.3) / 4)
    assert batch_size_efficiency(1.0, 0.0, 4.0) == pytest.approx(0.25)  # no noise: 1/s
    assert batch_size_efficiency(0.0, 1.0, 4.0) == pytest.approx(1.0)  # all noise: free
    values = [batch_size_efficiency(0.3, 2.0, s) for s in (1, 2, 4, 8)]
    assert values == sorted(values, reverse=True)
    with pytest.raises(ValueError, match="positive"):
        batch_size_efficiency(0.3, 2.0, 0.0)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_online_estimate_refuses_non_finite_statistics_and_keeps_its_estimate(bad: float) -> None:
    online = OnlineEta(num_blocks=4, min_observations=10)
    good = _noise([(0.1, 5.0), (0.2, 3.0), (0.05, 9.0), (1.0, 1.0)])
    online.update(good)
    plan = resolve_plan("staircase", 4, 4)
    before = online.estimate(plan)
    assert before.source == ONLINE
    poisoned = (BlockNoise(2, bad, 1.0, 8, 60, 120, 4),)
    with pytest.raises(InvalidNoiseStatisticsError, match="block 2: grad_sqr"):
        online.update(poisoned)
    poisoned_var = (BlockNoise(3, 0.1, bad, 8, 60, 120, 4),)
    with pytest.raises(InvalidNoiseStatisticsError, match="block 3: grad_var"):
        online.update(poisoned_var)
    assert online.estimate(plan) == before
    assert online.statistics == good


def test_validation_names_what_is_wrong() -> None:
    with pytest.raises(InvalidNoiseStatisticsError, match="negative"):
        validate_block_noise([BlockNoise(1, 0.1, -1.0, 8, 1, 0, 2)])
    with pytest.raises(InvalidNoiseStatisticsError, match=r"block must be in 1\.\.4"):
        validate_block_noise([BlockNoise(5, 0.1, 1.0, 8, 1, 0, 2)], 4)
    with pytest.raises(InvalidNoiseStatisticsError, match="twice"):
        validate_block_noise([BlockNoise(1, 0.1, 1.0, 8, 1, 0, 2)] * 2)
    with pytest.raises(InvalidNoiseStatisticsError, match="no statistics for block"):
        eta_for_plan(_noise([(0.1, 1.0)] * 3), resolve_plan("staircase", 4, 4))


def test_online_estimate_uses_the_prior_until_every_block_is_measured() -> None:
    plan = resolve_plan("uniform:3", 4, 4)
    online = OnlineEta(num_blocks=4, min_observations=10)
    assert online.estimate(plan).source == DEFAULT
    assert online.estimate(plan).eta == pytest.approx(1 - 9 / 16)
    # Only the output block measured (uniform:3 without probes): still the prior.
    online.update([BlockNoise(4, 0.1, 1.0, 8, 30, 29, 4)])
    assert online.estimate(plan).source == DEFAULT
    online.update(_noise([(0.1, 0.2)] * 4))
    estimate = online.estimate(plan)
    assert estimate.source == ONLINE
    assert estimate.eta == pytest.approx((0.4 + 0.8 / 4) / (0.4 + 0.2 * 3 + 0.2 / 4))
    # Statistics older than the ones held are ignored.
    online.update([BlockNoise(1, 0.1, 50.0, 8, 10, 5, 4)])
    assert online.estimate(plan) == estimate
    assert online.estimate(full_backprop(4, 4)).eta == 1.0


def test_prior_from_a_measured_table_names_its_source() -> None:
    table = EfficiencyTable([EfficiencyMeasurement("mlp", (0, 1, 2, 3), 4, 0.9, 0.05)])
    online = OnlineEta(4, prior=prior_from_table(lambda p: table.lookup("mlp", p)))
    exact = online.estimate(resolve_plan("staircase", 4, 4))
    assert (exact.eta, exact.source) == (0.9, MEASURED_TABLE)
    assert online.estimate(resolve_plan("uniform:1", 4, 4)).source == MEASURED_TABLE
    assert (
        OnlineEta(4, prior=prior_from_table(lambda p: EfficiencyTable().lookup("x", p)))
        .estimate(resolve_plan("uniform:1", 4, 4))
        .source
        == DEFAULT
    )


def test_statistics_parse_from_a_lease_summary_and_refuse_nan() -> None:
    entry = BlockNoise(2, 0.5, 3.0, 8, 12, 40, 3)
    assert parse_block_noise([entry.as_dict()], 4, origin="job j1") == (entry,)
    with pytest.raises(
        InvalidNoiseStatisticsError, match=r"job j1: block_noise\[0\] lacks grad_var"
    ):
        parse_block_noise(
            [{k: v for k, v in entry.as_dict().items() if k != "grad_var"}], 4, origin="job j1"
        )
    # JSON has no NaN literal, but Python's json module reads one: refused all the same.
    with pytest.raises(InvalidNoiseStatisticsError, match="job j1: block 2: grad_sqr"):
        parse_block_noise([{**entry.as_dict(), "grad_sqr": float("nan")}], 4, origin="job j1")
    with pytest.raises(InvalidNoiseStatisticsError, match="must be a list"):
        parse_block_noise({"block": 1}, 4)
