"""eta over training from Pollux's validation curves (jigsaw/simulator/eta_curves.py) and its
use in the simulator (jigsaw/simulator/curve_rates.py)."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from jigsaw.efficiency.online import job_eta
from jigsaw.model.domain import Job
from jigsaw.model.errors import TraceFormatError
from jigsaw.model.plan import SPBPlan
from jigsaw.simulator import SimulationSetup, load_jobs, make_oracle, make_rates, replay
from jigsaw.simulator.curve_rates import CurveEtaRate, philly_app
from jigsaw.simulator.eta_curves import (
    APPS,
    RATIOS_FILE,
    BlockShares,
    CurveEta,
    read_block_shares,
)
from jigsaw.traces import TraceJob
from jigsaw.traces.pollux_curves import load_app_curves

RIGID = {
    "min_workers": None,
    "max_workers": None,
    "batch_policy": "fixed",
    "min_global_batch": None,
    "max_global_batch": None,
}

DATA = Path(__file__).resolve().parents[2] / "data"
APPS_DIR = DATA / "pollux" / "apps"
TEST_APPS = ("cifar10", "deepspeech2", "imagenet", "ncf")
WORKLOAD = DATA / "pollux_workload_excerpt.csv"


@pytest.fixture(scope="module")
def curves() -> CurveEta:
    return CurveEta.load(APPS_DIR, TEST_APPS)


def uniform(depth: int, workers: int = 4, blocks: int = 4) -> SPBPlan:
    """``depth`` blocks skipped by every worker but rank 0."""
    return SPBPlan((0,) + (depth,) * (workers - 1), blocks)


def test_ratio_file_is_complete_for_the_six_applications() -> None:
    shares = read_block_shares()
    assert sorted(shares) == sorted(APPS)
    raw = json.loads(RATIOS_FILE.read_text())
    for app, entry in shares.items():
        assert entry.num_blocks == 4, app
        assert sum(entry.grad_sqr) == pytest.approx(1.0, abs=1e-3)
        assert sum(entry.grad_var) == pytest.approx(1.0, abs=1e-3)
        assert raw["apps"][app]["why"], app
    assert "how" in raw and "provenance" in raw


@pytest.mark.parametrize("app", TEST_APPS)
def test_full_backprop_is_one_and_eta_is_monotone_in_depth(curves: CurveEta, app: str) -> None:
    for progress in (0.0, 0.3, 0.9):
        assert curves.eta(app, SPBPlan((0, 0, 0, 0), 4), progress, 32).eta == 1.0
        etas = [curves.eta(app, uniform(d), progress, 32) for d in range(1, 4)]
        assert all(e.source == "curve" for e in etas)
        values = [e.eta for e in etas]
        assert values == sorted(values, reverse=True)
        assert values[0] > values[-1]
        assert all(0.25 <= v <= 1.0 for v in values)


def test_eta_follows_the_curve_noise_over_training(curves: CurveEta) -> None:
    """Where the curve's noise-to-signal ratio var/sqr is higher, dropping contributors costs
    more: eta is lower. Checked at every epoch of cifar10's curve at the job's global batch."""
    plan, batch = uniform(2), 32
    raw = load_app_curves(APPS_DIR / "cifar10").noise_curve(128)
    total = raw[-1][0]
    starts = [0.0] + [p / total for p, _, _ in raw[:-1]]
    points = [
        (curves.eta("cifar10", plan, start, batch).eta, var / sqr)
        for start, (_, sqr, var) in zip(starts, raw, strict=True)
    ]
    etas = [e for e, _ in points]
    assert max(etas) - min(etas) > 0.05  # it changes over training
    by_noise = sorted(points, key=lambda p: p[1])
    assert [e for e, _ in by_noise] == sorted(etas, reverse=True)


def test_mean_eta_is_the_harmonic_mean_over_the_remaining_progress(curves: CurveEta) -> None:
    plan = uniform(2)
    whole = curves.mean_eta("ncf", plan, 32, 0.0)
    tail = curves.mean_eta("ncf", plan, 32, 0.8)
    first = curves.eta("ncf", plan, 0.0, 32).eta
    last = curves.eta("ncf", plan, 0.999, 32).eta
    assert min(first, last) - 1e-9 <= whole <= 1.0
    assert tail != pytest.approx(whole)
    assert curves.mean_eta("ncf", SPBPlan((0, 0, 0, 0), 4), 32, 0.5) == 1.0


def test_shares_recut_for_another_block_count() -> None:
    shares = BlockShares("x", "m", (0.1, 0.2, 0.3, 0.4), (0.25, 0.25, 0.25, 0.25))
    two = shares.resampled(2)
    assert two.grad_sqr == pytest.approx((0.3, 0.7))
    eight = shares.resampled(8)
    assert sum(eight.grad_sqr) == pytest.approx(1.0)
    assert eight.grad_sqr[:2] == pytest.approx((0.05, 0.05))


def write_ratios(tmp_path: Path, apps: object) -> Path:
    path = tmp_path / "ratios.json"
    path.write_text(json.dumps({"apps": apps}))
    return path


def test_bad_ratio_file_names_file_and_field(tmp_path: Path) -> None:
    good = {"model": "mlp", "grad_sqr": [0.5, 0.5], "grad_var": [0.5, 0.5]}
    cases = [
        ({"ncf": {**good, "grad_var": [0.5, "x"]}}, "apps.ncf.grad_var[1]"),
        ({"ncf": {k: v for k, v in good.items() if k != "grad_sqr"}}, "apps.ncf.grad_sqr"),
        ({"ncf": {**good, "grad_sqr": [0.5, 0.6]}}, "sums to 1.1000"),
        ({"ncf": {**good, "grad_sqr": [0.5, 0.25, 0.25]}}, "one share per block"),
        ({"ncf": {**good, "model": ""}}, "apps.ncf.model"),
        ([1, 2], "'apps'"),
    ]
    for apps, field in cases:
        path = write_ratios(tmp_path, apps)
        with pytest.raises(TraceFormatError) as error:
            read_block_shares(path)
        assert str(path) in str(error.value) and field in str(error.value)
    (tmp_path / "broken.json").write_text("{not json")
    with pytest.raises(TraceFormatError, match=r"broken\.json"):
        read_block_shares(tmp_path / "broken.json")


def test_philly_rule_is_deterministic_and_seeded() -> None:
    jobs = [
        TraceJob(
            id=f"j{i}",
            submit_time_s=0.0,
            num_workers=w,
            model="resnet18_32",
            batch_size=32,
            duration_s=d,
        )
        for i, (w, d) in enumerate([(1, 60.0), (2, 7200.0), (8, 100.0), (16, 1e5)] * 10)
    ]
    first = [philly_app(j, 0) for j in jobs]
    assert first == [philly_app(j, 0) for j in jobs]
    assert set(first) <= set(APPS)
    assert first != [philly_app(j, 1) for j in jobs]
    assert {philly_app(j, 0) for j in jobs if j.num_workers == 1} <= {"ncf", "cifar10"}


def test_curve_rate_scales_the_oracle_rate_by_curve_over_table_eta(curves: CurveEta) -> None:
    setup = SimulationSetup(gpus=16, gpus_per_node=4, eta="curve", curves_dir=APPS_DIR)
    oracle = make_oracle(setup)
    jobs = load_jobs(WORKLOAD, setup, oracle, limit=6)
    rates, arrivals = make_rates(jobs, setup, oracle)
    assert isinstance(rates, CurveEtaRate)
    table_rates, _ = make_rates(jobs, SimulationSetup(gpus=16, gpus_per_node=4), oracle)
    arrival = next(a for a in arrivals if a.spec.workers >= 2)
    blocks = oracle.num_blocks(arrival.spec.model)
    plan = SPBPlan((0,) + (blocks - 1,) * (arrival.spec.workers - 1), blocks)
    placement = oracle.compact(arrival.spec.workers, 4)
    for done in (0.0, 0.5):
        job = Job(
            arrival.job_id,
            arrival.spec,
            submitted_at=0.0,
            iterations_done=done * arrival.spec.iterations,
        )
        expected = (
            table_rates.rate(job, placement, plan, {})
            * curves.mean_eta(arrival.trace.model, plan, arrival.spec.batch_size, done)
            / oracle.eta(arrival.spec.model, plan)
        )
        assert rates.rate(job, placement, plan, {}) == pytest.approx(expected)
    full = SPBPlan((0,) * arrival.spec.workers, blocks)
    assert rates.rate(job, placement, full, {}) == table_rates.rate(job, placement, full, {})


def test_replay_summary_says_curve_eta_was_used() -> None:
    setup = SimulationSetup(gpus=16, gpus_per_node=4, eta="curve", curves_dir=APPS_DIR)
    oracle = make_oracle(setup)
    jobs = load_jobs(WORKLOAD, setup, oracle, limit=8)
    rates, arrivals = make_rates(jobs, setup, oracle)
    result = replay(arrivals, "jigsaw", rates, oracle, setup)
    assert result.summary["eta_source"].startswith("curve: Pollux validation curves of")
    assert result.summary["completed"] == len(arrivals)
    table = SimulationSetup(gpus=16, gpus_per_node=4)
    table_rates, table_arrivals = make_rates(jobs, table, oracle)
    plain = replay(table_arrivals, "jigsaw", table_rates, oracle, table)
    assert not plain.summary["eta_source"].startswith("curve")


def test_unknown_eta_option_is_refused() -> None:
    setup = SimulationSetup(eta="magic")
    oracle = make_oracle(setup)
    with pytest.raises(ValueError, match="eta must be one of table, curve, one"):
        make_rates(load_jobs(WORKLOAD, setup, oracle, limit=2), setup, oracle)


SHARED_APPS = (
    Path(os.environ.get("JIGSAW_SHARED_DIR") or Path(__file__).resolve().parents[4] / "shared")
    / "traces"
    / "pollux"
    / "apps"
)


@pytest.mark.skipif(not SHARED_APPS.is_dir(), reason="no ../shared (bert and yolov3 curves)")
def test_philly_replay_with_curve_eta_maps_jobs_to_applications() -> None:
    trace = DATA / "philly_excerpt.csv"
    setup = SimulationSetup(gpus=64, gpus_per_node=8, eta="curve", curves_dir=SHARED_APPS)
    oracle = make_oracle(setup)
    jobs = load_jobs(trace, setup, oracle)
    rates, arrivals = make_rates(jobs, setup, oracle, trace)
    assert isinstance(rates, CurveEtaRate)
    assert rates.app_of == {a.job_id: philly_app(a.trace, 0) for a in arrivals}
    result = replay(arrivals, "jigsaw", rates, oracle, setup)
    assert result.summary["eta_source"].startswith("curve:")
    assert result.summary["completed"] == len(arrivals)


def test_curve_replay_reports_the_curve_noise_so_the_policy_prices_with_the_curve_eta(
    curves: CurveEta,
) -> None:
    """The simulated workers report the gradient statistics of their application's curve, as
    real workers report theirs: the policy then prices a plan with the eta the gang will
    progress at, not with the table's."""
    setup = SimulationSetup(gpus=16, gpus_per_node=4, eta="curve", curves_dir=APPS_DIR)
    oracle = make_oracle(setup)
    jobs = load_jobs(WORKLOAD, setup, oracle, limit=8)
    rates, arrivals = make_rates(jobs, setup, oracle)
    assert isinstance(rates, CurveEtaRate)
    # At their trace's size and batch: jigsaw's elastic rule would resize these (Pollux jobs
    # are elastic), and their statistics would then be those of other batches.
    rigid = [replace(a, spec=replace(a.spec, **RIGID)) for a in arrivals]
    result = replay(rigid, "jigsaw", rates, oracle, setup)
    gangs = [j for j in result.store.all_jobs() if j.spec.workers >= 2]
    reported = [j for j in gangs if j.block_noise]
    assert reported, "no multi-worker job reported gradient statistics"
    for job in reported:
        blocks = oracle.num_blocks(job.spec.model)
        plan = uniform(blocks - 1, job.spec.workers, blocks)
        app = rates.app_of[job.id]
        at = max(entry.last_iteration for entry in job.block_noise) / job.spec.iterations
        priced = job_eta(job, plan)
        assert priced.source == "online"
        assert priced.eta == pytest.approx(
            curves.eta(app, plan, at, job.spec.batch_size).eta, rel=1e-9
        )
    # A policy that never runs an SPB plan sees the same rates and makes the same decisions.
    table = SimulationSetup(gpus=16, gpus_per_node=4)
    table_rates, table_arrivals = make_rates(jobs, table, oracle)
    las_curve = replay(arrivals, "las", rates, oracle, setup)
    las_table = replay(table_arrivals, "las", table_rates, oracle, table)
    assert las_curve.summary["decision_log_sha256"] == las_table.summary["decision_log_sha256"]
    assert not any(j.block_noise for j in las_table.store.all_jobs())
