"""The goodput model for size and batch against hand-computed values (jigsaw/goodput)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from jigsaw.efficiency.model import batch_size_efficiency
from jigsaw.goodput import (
    BatchLimits,
    GoodputModel,
    GradientNoise,
    StepObservation,
    StepTimeModel,
    fit_step_times,
)
from jigsaw.goodput.calibration import calibrate, errors, held_out_errors, observations_of
from jigsaw.model.block_noise import BlockNoise
from jigsaw.oracle.calibration import load_app

APPS = Path(__file__).resolve().parents[2] / "data" / "pollux" / "apps"
MODEL = StepTimeModel(0.1, 0.01, 0.2, 0.01, 0.05, 0.005, 1.0)


# -- batch efficiency from the noise ------------------------------------------------------


def test_efficiency_is_phi_plus_reference_over_phi_plus_batch() -> None:
    noise = GradientNoise(grad_sqr=1.0, sample_var=100.0)  # phi = 100 samples
    assert noise.noise_scale == 100.0
    assert noise.efficiency([100, 300, 700], reference=100) == pytest.approx([1.0, 0.5, 0.25])


def test_efficiency_equals_pollux_scalar_form() -> None:
    """Pollux's (var + sqr) / (var / s + sqr) / s with var at the reference batch."""
    noise = GradientNoise.at_batch(grad_sqr=0.37, grad_var=2.5, batch=128)
    for batch in (128, 256, 1000, 4096):
        assert float(noise.efficiency(batch, 128)) == pytest.approx(
            batch_size_efficiency(0.37, 2.5, batch / 128)
        )


def test_pure_noise_scales_perfectly_and_blocks_add_up() -> None:
    assert GradientNoise(0.0, 5.0).efficiency([64, 4096], 64) == pytest.approx([1.0, 1.0])
    blocks = (
        BlockNoise(
            block=1,
            grad_sqr=1.0,
            grad_var=2.0,
            batch=32,
            observations=3,
            last_iteration=9,
            contributors=4,
        ),
        BlockNoise(
            block=2,
            grad_sqr=3.0,
            grad_var=0.5,
            batch=32,
            observations=3,
            last_iteration=9,
            contributors=4,
        ),
    )
    assert GradientNoise.of_blocks(blocks) == GradientNoise(4.0, 2.0 * 32 + 0.5 * 32)
    assert GradientNoise.of_blocks(()) is None
    with pytest.raises(ValueError, match="negative"):
        GradientNoise(1.0, -1.0)


# -- step times -----------------------------------------------------------------------------


def test_step_time_by_hand() -> None:
    assert float(MODEL.micro_batch_s(10)) == pytest.approx(0.2)
    assert float(MODEL.step_s(1, 1, 10)) == pytest.approx(0.2)  # one replica: no all-reduce
    assert float(MODEL.step_s(1, 4, 10)) == pytest.approx(0.2 + 0.05 + 0.005 * 2)
    assert float(MODEL.step_s(2, 4, 10)) == pytest.approx(0.2 + 0.2 + 0.01 * 2)
    assert float(MODEL.iteration_s(2, 4, 10, 2)) == pytest.approx(2 * 0.2 + 0.42)
    overlapped = StepTimeModel(0.1, 0.01, 0.2, 0.01, 0.05, 0.005, 2.0)
    assert float(overlapped.step_s(2, 4, 10)) == pytest.approx(math.hypot(0.2, 0.22))


def test_fit_recovers_the_model_that_made_the_data() -> None:
    truth = StepTimeModel(0.02, 0.001, 0.3, 0.02, 0.08, 0.004, 1.5)
    shapes = [(n, r) for n, r in [(1, 1), (1, 2), (1, 4), (2, 4), (2, 8), (4, 16), (8, 32)]]
    observations = [
        StepObservation(
            n,
            r,
            b,
            float(truth.step_s(n, r, b)),
            float(truth.step_s(n, r, b) - truth.micro_batch_s(b)),
        )
        for n, r in shapes
        for b in (16, 64, 256)
    ]
    fitted = fit_step_times(observations)
    for n, r in shapes:
        for b in (32, 128):
            assert float(fitted.step_s(n, r, b)) == pytest.approx(
                float(truth.step_s(n, r, b)), rel=0.03
            )


def test_a_job_seen_on_one_gpu_is_believed_to_scale() -> None:
    """One shape, one micro-batch: compute split half and half, networks held near zero, and
    across nodes at least 1.1 x within a node (Pollux's optimistic prior)."""
    fitted = fit_step_times([StepObservation(1, 1, 64, 0.5, 0.01)])
    assert fitted.compute_s == pytest.approx(0.49 / 2)
    assert fitted.intra_node_s < 1e-6
    assert fitted.inter_node_s >= 1.1 * fitted.intra_node_s
    assert float(fitted.step_s(4, 16, 64)) == pytest.approx(float(fitted.step_s(1, 1, 64)))


def test_observations_and_models_refuse_nonsense() -> None:
    with pytest.raises(ValueError, match="nodes <= replicas"):
        StepObservation(2, 1, 32, 0.1, 0.01)
    with pytest.raises(ValueError, match="sync < step"):
        StepObservation(1, 1, 32, 0.1, 0.1)
    with pytest.raises(ValueError, match="overlap"):
        StepTimeModel(0.1, 0.01, 0.2, 0.01, 0.05, 0.005, 11.0)
    with pytest.raises(ValueError, match="min_batch"):
        BatchLimits(256, 128, 8, 64)


# -- the goodput-optimal batch ----------------------------------------------------------------


def _throughput_only(per_sample_s: float) -> StepTimeModel:
    """Compute proportional to the samples, nothing else: samples/s never depends on the batch."""
    return StepTimeModel(1e-9, per_sample_s, 1e-9, 1e-9, 1e-9, 1e-9, 1.0)


def test_when_batches_do_not_speed_up_steps_the_smallest_batch_wins() -> None:
    limits = BatchLimits(min_batch=64, max_batch=4096, min_local=16, max_local=256)
    model = GoodputModel(_throughput_only(0.001), GradientNoise(1.0, 500.0), limits)
    choice = model.best(nodes=1, replicas=2)
    assert (choice.atomic, choice.accum, choice.worker_batch) == (32, 0, 32)
    assert choice.goodput == pytest.approx(2 * 1000.0, rel=1e-6)  # 1,000 samples/s per GPU


def test_without_noise_statistics_a_job_runs_the_smallest_batch_its_size_allows() -> None:
    limits = BatchLimits(min_batch=64, max_batch=4096, min_local=48, max_local=256)
    model = GoodputModel(MODEL, None, limits)
    assert model.best(nodes=1, replicas=2).worker_batch == 48  # 64 / 2 is below min_local
    assert model.best(nodes=1, replicas=1).worker_batch == 64


def test_the_best_batch_is_the_argmax_over_pollux_candidates() -> None:
    """Fixed cost per micro-batch (so bigger batches run faster) against falling efficiency:
    brute force over the 50 geometric candidates, split by hand."""
    model = StepTimeModel(0.05, 0.0005, 0.1, 1e-9, 0.02, 1e-9, 1.0)
    noise = GradientNoise(1.0, 800.0)
    limits = BatchLimits(min_batch=128, max_batch=8192, min_local=32, max_local=512)
    goodput_model = GoodputModel(model, noise, limits)
    nodes, replicas = 2, 8
    best = (0.0, 0, 0)
    for batch in np.geomspace(max(128, 32 * replicas), 8192, 50):
        local = batch / replicas
        accum = math.ceil(local / 512 - 1e-8) - 1
        atomic = math.ceil(local / (accum + 1) - 1e-8)
        if not 32 <= atomic <= 512:
            continue
        total = replicas * atomic * (accum + 1)
        seconds = accum * (0.05 + 0.0005 * atomic) + (0.05 + 0.0005 * atomic) + 0.1
        goodput = total / seconds * (800.0 + 128) / (800.0 + total)
        best = max(best, (goodput, atomic, accum))
    choice = goodput_model.best(nodes, replicas)
    assert (choice.goodput, choice.atomic, choice.accum) == pytest.approx(best)


def test_one_worker_above_the_reference_batch_accumulates() -> None:
    """Big batches on one GPU go through gradient accumulation (micro-batches of at most
    max_local, and at least two above the reference batch)."""
    limits = BatchLimits(min_batch=64, max_batch=1024, min_local=16, max_local=128)
    overhead = StepTimeModel(0.01, 0.001, 1e-9, 1e-9, 1e-9, 1e-9, 1.0)
    model = GoodputModel(overhead, GradientNoise(0.0, 1.0), limits)
    _, atomic, accum = model.best_many(np.array([1, 1]), np.array([1, 4]))
    # Pure noise: efficiency 1 everywhere, and the fixed cost per micro-batch makes the
    # largest micro-batches and the largest batch the fastest.
    assert (atomic[0], accum[0]) == (128, 7)  # 1,024 on one worker: 8 micro-batches of 128
    assert (atomic[1], accum[1]) == (128, 1)  # 1,024 on four: 256 each, in two of 128


# -- calibration on Pollux's measurements ---------------------------------------------------


@pytest.mark.parametrize(
    "app,in_sample,held_out",
    [("cifar10", 0.09, 0.10), ("deepspeech2", 0.11, 0.13), ("imagenet", 0.09, 0.12)],
)
def test_calibrated_step_times_predict_shapes_they_have_not_seen(
    app: str, in_sample: float, held_out: float
) -> None:
    """On the excerpt of each application (full files: bench/goodput_calibration.py)."""
    rows = load_app(APPS / app)
    assert errors(calibrate(rows), observations_of(rows)).step_mape < in_sample
    assert held_out_errors(rows).step_mape < held_out
