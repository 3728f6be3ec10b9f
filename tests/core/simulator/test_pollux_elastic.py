"""Elastic Pollux jobs in the simulator: what the trace lets a policy change, and how a gang
off its initial size and batch progresses (its speed changes epoch by epoch)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from jigsaw.model.domain import Job
from jigsaw.model.plan import full_backprop
from jigsaw.simulator import SimulationSetup, load_jobs, make_oracle, make_rates
from jigsaw.simulator.pollux_rate import PolluxRate
from jigsaw.simulator.rate_executor import RateDrivenExecutor
from jigsaw.traces.pollux_curves import AppCurves, CurvePoint, ValidationCurve
from jigsaw.traces.pollux_progress import JobWork

APPS = Path(__file__).resolve().parents[2] / "data" / "pollux" / "apps"
HEADER = "name,time,application,num_replicas,batch_size\n"


def _jobs(tmp_path: Path, rows: str) -> tuple[PolluxRate, list[Job]]:
    root = tmp_path / "pollux"
    (root / "workloads").mkdir(parents=True)
    (root / "apps").symlink_to(APPS, target_is_directory=True)
    trace = root / "workloads" / "w.csv"
    trace.write_text(HEADER + rows)
    setup = SimulationSetup(gpus=16, gpus_per_node=4)
    oracle = make_oracle(setup)
    rates, arrivals = make_rates(load_jobs(trace, setup, oracle), setup, oracle, trace)
    assert isinstance(rates, PolluxRate)
    return rates, [Job(id=a.job_id, spec=a.spec, submitted_at=a.at) for a in arrivals]


def test_pollux_jobs_are_elastic_as_in_pollux_except_ncf(tmp_path: Path) -> None:
    _, (cifar, ncf) = _jobs(tmp_path, "c,0,cifar10,6,2048\nn,1,ncf,1,32768\n")
    # The trace's request is the initial size (342 = ceil(2048 / 6) per worker); Pollux may
    # run it on 1..4096/32 GPUs at any validated batch.
    assert (cifar.spec.workers, cifar.spec.batch_size) == (6, 342)
    assert cifar.spec.worker_range == (1, 128)
    assert (cifar.spec.batch_policy, cifar.spec.batch_range) == ("adaptive", (128, 4096))
    assert not ncf.spec.is_elastic


def test_work_left_follows_the_cost_of_each_epoch() -> None:
    """Two epochs needing 10 and 20 units of progress at gain 1: at 1 s and 2 s per unit,
    10 s then 40 s."""
    points = (CurvePoint(10.0, 10, 0.5, 1.0, 0.0), CurvePoint(30.0, 30, 0.9, 1.0, 0.0))
    curves = AppCurves("toy", (ValidationCurve(10, points, "toy"),), epochs=2)
    work = JobWork(curves, initial_batch=10)
    assert work.ends == [10.0, 30.0]
    assert work.seconds_left(0.0, [1.0, 2.0]) == pytest.approx(50.0)
    assert work.seconds_left(5.0, [1.0, 2.0]) == pytest.approx(45.0)
    curve = work.progress_curve(0.0, [1.0, 2.0])
    assert [curve(s) for s in (0.0, 0.2, 0.6, 1.0)] == pytest.approx([0.0, 1 / 3, 2 / 3, 1.0])


def test_an_elastic_gang_stands_where_its_epochs_put_it(tmp_path: Path) -> None:
    """Re-rated half-way (a re-plan in place, free here), a gang must stand exactly where it
    would have without: its progress follows its epochs, not a straight line."""
    rates, (job,) = _jobs(tmp_path, "c,0,cifar10,6,2048\n")
    managed = replace(job, worker_batch=128)  # a policy chose its batch: adaptive per epoch
    placement, plan = ((0, 0), (0, 1)), full_backprop(2, 1)
    straight, interrupted = RateDrivenExecutor(rates), RateDrivenExecutor(rates)
    for executor in (straight, interrupted):
        executor.start(managed, placement, plan)
    total_s = managed.spec.iterations / rates.speed(managed, (2,))
    interrupted.progress("c", total_s / 3)
    interrupted.replan("c", placement, plan)
    at = 2 * total_s / 3
    assert interrupted.progress("c", at) == pytest.approx(straight.progress("c", at), rel=1e-9)
    # Early epochs are cheap in iterations counted at the trace's batch of 2,048: a straight
    # line from start to finish would put it far behind.
    assert straight.progress("c", total_s / 3) > managed.spec.iterations / 3
