"""The co-location model: time-slicing is today's turns, concurrent sharing follows the fit on
Gavel's pairs, interference lowers every shared rate, and bad settings are refused."""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.hardware import preset
from jigsaw.model.plan import full_backprop
from jigsaw.model.profiles import canonical_name
from jigsaw.oracle import ColocationModel, GangTiming, Oracle, SharingSettings
from jigsaw.oracle.colocation_concurrent import (
    FEATURES,
    FLOOR,
    UNKNOWN_PAIR_FRACTION,
    ConcurrentFit,
    load_fit,
)
from jigsaw.oracle.timeslicing import timesliced_iteration_times
from jigsaw.traces import GavelThroughputs

ROOT = Path(__file__).resolve().parents[3]
EXCERPT = ROOT / "tests" / "data" / "gavel_throughputs_excerpt.json"
V100 = preset("v100")
G = (0, 0)


def _one_gpu(oracle: Oracle, model: str, batch: int = 32) -> GangTiming:
    return oracle.timing(model, batch, full_backprop(1, oracle.num_blocks(model)), (G,))


def test_timeslice_is_the_turn_model_exactly() -> None:
    gangs = {
        "host": GangTiming(1.0, ((G, 0.4), ((0, 1), 1.0))),
        "guest": GangTiming(0.1, ((G, 0.1),)),
        "alone": GangTiming(2.0, (((1, 0), 2.0),)),
    }
    assert ColocationModel(V100).iteration_times(gangs) == timesliced_iteration_times(gangs)


def test_interference_slows_only_the_gangs_that_share() -> None:
    gangs = {
        "a": GangTiming(1.0, ((G, 1.0),)),
        "b": GangTiming(1.0, ((G, 1.0),)),
        "c": GangTiming(1.0, (((0, 1), 1.0),)),
    }
    plain = ColocationModel(V100).iteration_times(gangs)
    penalised = ColocationModel(V100, SharingSettings("timeslice", 0.25)).iteration_times(gangs)
    assert penalised["a"] == pytest.approx(plain["a"] / 0.75)
    assert penalised["b"] == pytest.approx(plain["b"] / 0.75)
    assert penalised["c"] == plain["c"] == 1.0


def test_a_concurrent_pair_of_full_jobs_runs_at_the_fitted_fractions() -> None:
    oracle = Oracle(V100, sharing=SharingSettings("concurrent"))
    a, b = _one_gpu(oracle, "resnet50_224"), _one_gpu(oracle, "resnet18_32")
    # busy = alone (a one-worker gang that computes all of its iteration): the pair fraction
    full_a, full_b = (
        GangTiming(a.alone_s, ((G, a.alone_s),), a.profile),
        GangTiming(b.alone_s, ((G, b.alone_s),), b.profile),
    )
    fractions = oracle.colocation.shared_fractions({"a": full_a, "b": full_b})
    fit = oracle.colocation.fit
    assert a.profile is not None and b.profile is not None
    assert fractions["a"] == pytest.approx(
        fit.pair_fraction(a.profile, a.alone_s, b.profile, b.alone_s)
    )
    assert fractions["b"] == pytest.approx(
        fit.pair_fraction(b.profile, b.alone_s, a.profile, a.alone_s)
    )
    assert 0.2 < fractions["a"] < 1.0 and 0.2 < fractions["b"] < 1.0


def test_a_partner_busy_half_the_time_costs_half_the_slow_down() -> None:
    fit = ConcurrentFit("v100", (0.5,) + (0.0,) * (len(FEATURES) - 1), V100.rated_flops)
    model = ColocationModel(V100, SharingSettings("concurrent"), fit)
    oracle = Oracle(V100)
    profile = _one_gpu(oracle, "resnet18_32").profile
    busy = GangTiming(1.0, ((G, 1.0),), profile)
    half = GangTiming(1.0, ((G, 0.5), ((0, 1), 1.0)), profile)
    times = model.iteration_times({"busy": busy, "half": half})
    # f = 0.5 -> slow-down 1/f - 1 = 1, weighted by the partner's duty
    assert times["busy"] == pytest.approx(1.0 + 1.0 * 0.5)
    assert times["half"] == pytest.approx(1.0 + 0.5 * 1.0)
    unknown = GangTiming(1.0, ((G, 1.0),))
    times = model.iteration_times({"busy": busy, "unknown": unknown})
    assert times["unknown"] == pytest.approx(1.0 / UNKNOWN_PAIR_FRACTION)


def test_slow_downs_of_several_partners_add() -> None:
    fit = ConcurrentFit("v100", (0.5,) + (0.0,) * (len(FEATURES) - 1), V100.rated_flops)
    model = ColocationModel(V100, SharingSettings("concurrent"), fit)
    profile = _one_gpu(Oracle(V100), "resnet18_32").profile
    gangs = {name: GangTiming(1.0, ((G, 1.0),), profile) for name in "abc"}
    assert model.iteration_times(gangs) == {name: pytest.approx(3.0) for name in "abc"}


def test_fractions_are_clipped_and_features_clamped_to_the_measured_range() -> None:
    low = ConcurrentFit("v100", (-3.0,) + (0.0,) * (len(FEATURES) - 1), V100.rated_flops)
    high = ConcurrentFit("v100", (3.0,) + (0.0,) * (len(FEATURES) - 1), V100.rated_flops)
    profile = _one_gpu(Oracle(V100), "resnet18_32").profile
    assert profile is not None
    assert low.pair_fraction(profile, 1.0, profile, 1.0) == FLOOR
    assert high.pair_fraction(profile, 1.0, profile, 1.0) == 1.0
    slope = (0.0,) * 3 + (0.1,) + (0.0,) * (len(FEATURES) - 4)  # on log r_j
    ranges = tuple((-5.0, 5.0) for _ in FEATURES)
    clamped = ConcurrentFit("v100", slope, V100.rated_flops, ranges)
    # log r_j = log(1 / 1e-6) = 13.8 is clamped to 5
    assert clamped.pair_fraction(profile, 1e-6, profile, 1.0) == pytest.approx(0.5)


def test_the_shipped_fit_beats_a_constant_on_gavels_excerpt() -> None:
    """In sample on the excerpt's v100 pairs (no placeholder: neither rate equals its solo
    rate): the fit is closer to the measured fractions than the pairs' mean fraction."""
    table = GavelThroughputs.load(EXCERPT)
    oracle = Oracle(V100)
    fit = load_fit(V100)
    solo = {
        job: rate for (w, job, scale), rate in table.alone.items() if w == "v100" and scale == 1
    }
    measured, predicted = [], []
    for (w, job, _, other, _), (mine, theirs) in table.paired.items():
        if w != "v100" or mine in (0.0, solo[job]) or theirs in (0.0, solo[other]):
            continue
        profiles = []
        for name in (job, other):
            model, batch = canonical_name(name)
            profiles.append(
                oracle.sharing_profile(
                    model, batch or oracle.profiles.get(model).default_batch_size
                )
            )
        measured.append(mine / solo[job])
        predicted.append(
            fit.pair_fraction(profiles[0], 1 / solo[job], profiles[1], 1 / solo[other])
        )
    assert len(measured) >= 6
    mean = statistics.fmean(measured)
    model_error = statistics.median(abs(p - m) for p, m in zip(predicted, measured, strict=True))
    constant_error = statistics.median(abs(mean - m) for m in measured)
    assert model_error < constant_error


def test_gpu_types_gavel_did_not_measure_use_the_v100_fit() -> None:
    assert load_fit(preset("p100")).gpu_type == "p100"
    t4 = load_fit(preset("t4"))
    assert t4.gpu_type == "v100" and t4.rated_flops == preset("t4").rated_flops


@pytest.mark.parametrize(
    ("mode", "interference", "field"),
    [
        ("mps", 0.0, "sharing"),
        ("timeslice", -0.1, "interference"),
        ("timeslice", 0.95, "interference"),
        ("concurrent", math.inf, "interference"),
    ],
)
def test_bad_sharing_settings_are_refused(mode: str, interference: float, field: str) -> None:
    with pytest.raises(InvalidSpecError) as error:
        SharingSettings(mode, interference)
    assert error.value.field == field


def test_a_broken_fit_file_is_refused() -> None:
    with pytest.raises(InvalidSpecError, match="coefficients must be a list of finite numbers"):
        load_fit(V100, {"gpu_types": {"v100": {"coefficients": [1.0, math.nan]}}})
    with pytest.raises(InvalidSpecError, match="has 2 coefficients"):
        load_fit(V100, {"gpu_types": {"v100": {"coefficients": [1.0, 2.0]}}})


SHARED_GAVEL = (
    Path(os.environ.get("JIGSAW_SHARED_DIR", ROOT.parent / "shared"))
    / "traces"
    / "gavel"
    / "simulation_throughputs.json"
)


@pytest.mark.skipif(not SHARED_GAVEL.is_file(), reason="no ../shared")
def test_the_shipped_fit_is_what_the_fit_bench_makes_from_gavels_file() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.colocation_fit", "--throughputs", str(SHARED_GAVEL)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    report = json.loads(done.stdout)["per_gpu_type"]
    shipped = json.loads((ROOT / "jigsaw" / "data" / "colocation.json").read_text())
    assert report["v100"]["placeholder_pairs"] == 69
    for gpu in ("v100", "p100", "k80"):
        assert shipped["gpu_types"][gpu]["pairs_used"] == report[gpu]["rows_used"]
        # out of sample, the model beats a constant on every GPU type
        model = report[gpu]["model_leave_one_job_type_out"]["median"]
        assert model < report[gpu]["constant_leave_one_job_type_out"]["median"]
    fit = load_fit(V100)
    refit = subprocess.run(
        [sys.executable, "-c", _REFIT],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    assert json.loads(refit.stdout) == pytest.approx(list(fit.coefficients), rel=1e-9)


_REFIT = f"""
import json
from bench.colocation_fit import fitted, job_profiles, measured_rows
from jigsaw.model.hardware import preset
from jigsaw.oracle import Oracle
from jigsaw.traces import GavelThroughputs
table = GavelThroughputs.load({str(SHARED_GAVEL)!r})
rows, solo, _, _ = measured_rows(table, "v100")
profiles = job_profiles(Oracle(preset("v100")), sorted(solo))
print(json.dumps(list(fitted("v100", rows, profiles, solo).coefficients)))
"""
