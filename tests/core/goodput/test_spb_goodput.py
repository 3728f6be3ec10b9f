"""An SPB plan priced on the goodput model's scale: samples/s x E(batch) x eta(plan), with
eta measured online once the job reports every block, its prior before."""

from __future__ import annotations

import numpy as np
import pytest

from jigsaw.efficiency.table import EtaEstimate
from jigsaw.goodput import BatchLimits, GoodputModel, GradientNoise, StepTimeModel
from jigsaw.goodput.spb import with_plan_eta
from jigsaw.model.block_noise import BlockNoise
from jigsaw.model.domain import Job, JobSpec
from jigsaw.model.plan import full_backprop, staircase

STEPS = StepTimeModel(0.1, 0.01, 0.2, 0.01, 0.05, 0.005, 1.0)
LIMITS = BatchLimits(64, 1024, 16, 128)
NOISE = GradientNoise(1.0, 500.0)


def test_with_eta_scales_every_goodput_and_keeps_the_batch_choice() -> None:
    model = GoodputModel(STEPS, NOISE, LIMITS)
    spb = model.with_eta(0.8)
    nodes, replicas = np.array([1, 1, 2]), np.array([1, 4, 8])
    value, atomic, accum = model.best_many(nodes, replicas)
    spb_value, spb_atomic, spb_accum = spb.best_many(nodes, replicas)
    assert spb_value == pytest.approx(0.8 * value)
    assert (spb_atomic == atomic).all() and (spb_accum == accum).all()
    assert spb.best(1, 4).goodput == pytest.approx(0.8 * model.best(1, 4).goodput)
    assert model.eta == 1.0 and spb.eta == 0.8
    with pytest.raises(ValueError, match="eta"):
        model.with_eta(0.0)
    with pytest.raises(ValueError, match="eta"):
        model.with_eta(1.2)


def _job(block_noise: tuple[BlockNoise, ...] = ()) -> Job:
    spec = JobSpec(name="j", model="mlp", workers=4, iterations=100, batch_size=32)
    return Job(id="j", spec=spec, submitted_at=0.0, block_noise=block_noise)


def _noise(sqr: float, var: float) -> tuple[BlockNoise, ...]:
    return tuple(
        BlockNoise(
            block=b,
            grad_sqr=sqr,
            grad_var=var,
            batch=32,
            observations=20,
            last_iteration=50,
            contributors=4,
        )
        for b in (1, 2, 3, 4)
    )


def test_the_plan_eta_is_the_prior_before_reports_and_online_after() -> None:
    model = GoodputModel(STEPS, NOISE, LIMITS)
    plan = staircase(4, 4)
    prior = with_plan_eta(model, _job(), plan, lambda _plan: EtaEstimate(0.7, "measured table"))
    assert (prior.eta.eta, prior.eta.source) == (0.7, "measured table")
    assert prior.model.best(1, 4).goodput == pytest.approx(0.7 * model.best(1, 4).goodput)
    # Almost no noise: averaging fewer workers' gradients costs (nearly) nothing.
    quiet = with_plan_eta(model, _job(_noise(1.0, 1e-6)), plan)
    assert quiet.eta.source == "online" and quiet.eta.eta == pytest.approx(1.0, abs=1e-5)
    # Noise-dominated: the online eta falls well below 1 and so does the plan's goodput.
    noisy = with_plan_eta(model, _job(_noise(1e-3, 10.0)), plan)
    assert noisy.eta.source == "online" and noisy.eta.eta < 0.7
    assert noisy.model.best(1, 4).goodput == pytest.approx(noisy.eta.eta * model.best(1, 4).goodput)
    full = with_plan_eta(model, _job(_noise(1e-3, 10.0)), full_backprop(4, 4))
    assert full.eta.eta == 1.0
