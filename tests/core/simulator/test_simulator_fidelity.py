"""The simulator follows the peers' own simulators on their trace formats (issue 14).

These pin semantics, not figures: Pollux's work and progress (validation curves, statistical
efficiency, 30 s per allocation, 60 s interval), Gavel's rounds (a newcomer starts when the
round ends, or at once on an idle cluster; a round ends with its last gang; max-min
time-slices round by round with no protection), and the refusals of bad input.
"""

from __future__ import annotations

import math
import os
from dataclasses import replace
from pathlib import Path

import pytest

from jigsaw.model.cluster import per_node_counts
from jigsaw.model.domain import Job, JobSpec
from jigsaw.model.errors import InvalidSpecError, TraceFormatError
from jigsaw.planning.planner import Planner
from jigsaw.policies.maxmin import MaxMinPolicy
from jigsaw.policies.shared.gavel_fifo import gavel_fifo_allocation
from jigsaw.policies.shared.gavel_share import GavelPriorities, gavel_allocation
from jigsaw.simulator import SimulationSetup, load_jobs, make_oracle, make_rates, replay
from jigsaw.simulator.pollux_rate import PolluxRate
from jigsaw.simulator.replay_result import ReplayResult
from jigsaw.simulator.semantics import GAVEL, JIGSAW, POLLUX, semantics_for
from jigsaw.traces import load_trace
from jigsaw.traces.pollux_apps import load_pollux_app
from jigsaw.traces.pollux_curves import (
    gain,
    load_app_curves,
    read_validation,
    statistical_efficiency,
)

DATA = Path(__file__).resolve().parents[2] / "data"
SHARED = Path(os.environ.get("JIGSAW_SHARED_DIR", Path(__file__).resolve().parents[4] / "shared"))
APPS = DATA / "pollux" / "apps"
HEADER = "name,time,application,num_replicas,batch_size\n"


# -- Pollux: curves and work ---------------------------------------------------------------


def test_efficiency_is_pollux_formula_and_at_most_one() -> None:
    assert statistical_efficiency(2.0, 0.0, 8.0) == pytest.approx(1 / 8)  # no noise: 1/s
    assert statistical_efficiency(0.0, 3.0, 8.0) == pytest.approx(1.0)  # pure noise: free
    assert statistical_efficiency(1.0, 1.0, 4.0) == pytest.approx((1 + 1) / (1 / 4 + 1) / 4)
    for sqr, var in [(17.4, 13.9), (2.8, 2.8), (0.01, 5.0)]:
        for scale in (1.0, 2.0, 16.0):
            assert 0 < statistical_efficiency(sqr, var, scale) <= 1.0 + 1e-12
            assert gain(sqr, var, scale) >= 1.0 - 1e-12  # a bigger batch never goes backwards


def test_noise_curve_reads_the_validation_rows() -> None:
    curves = load_app_curves(APPS / "cifar10")
    assert [c.batch_size for c in curves.curves] == [128, 2048, 4096]
    assert curves.init_batch_size == 128 and curves.epochs == 100
    run = read_validation(APPS / "cifar10" / "validation-2048.csv")
    first = run.points[0]
    # At a measured batch the curve is that run's own columns.
    progress, sqr, var = curves.noise_curve(2048)[0]
    assert (sqr, var) == (first.grad_sqr, first.grad_var)
    assert progress == min(c.points[0].progress for c in curves.curves)
    # Between two measured batches it is the straight line between them.
    low, high = curves.grad_stats(2048, 5), curves.grad_stats(4096, 5)
    mid = curves.grad_stats(3072, 5)
    assert mid == pytest.approx(((low[0] + high[0]) / 2, (low[1] + high[1]) / 2))


def test_work_at_the_initial_batch_is_the_progress_itself() -> None:
    """At the initial batch one iteration is one unit of progress (gain 1): the work to
    finish is where the last epoch ends."""
    curves = load_app_curves(APPS / "cifar10")
    assert curves.iterations_to_finish(128) == pytest.approx(curves.epoch_progress(100))


def test_a_bigger_batch_needs_fewer_but_less_efficient_iterations() -> None:
    curves = load_app_curves(APPS / "cifar10")
    small, big = curves.iterations_to_finish(128), curves.iterations_to_finish(4096)
    assert big < small  # each iteration of 4096 samples makes more progress...
    assert big * 4096 / 128 > small  # ...but less than 32 small ones (efficiency < 1)


def test_pollux_jobs_carry_the_curves_work_at_their_batch_split() -> None:
    app = load_pollux_app(APPS, "ncf")
    split = app.split(1, 32768)
    # One replica over the initial batch accumulates at least two micro-batches (Pollux).
    assert split.accum >= 1 and split.batch == 32768
    job = next(j for j in load_trace(DATA / "pollux_workload_excerpt.csv") if j.id == "ncf-2")
    assert job.iterations == math.ceil(app.curves.iterations_to_finish(32768))


def test_a_lone_pollux_job_takes_its_work_over_its_speed_plus_one_allocation(
    tmp_path: Path,
) -> None:
    """JCT = 30 s (re)allocation + iterations x seconds per iteration at its placement."""
    trace = _pollux_workload(tmp_path, "cifar10-0,0,cifar10,4,2048\n")
    result, rates = _pollux_replay(trace, "las", gpus=8, gpus_per_node=4)
    job = result.store.all_jobs()[0]
    seconds = result.summary["avg_jct_s"]
    speed = rates.iterations_per_second(job, (4,))
    assert seconds == pytest.approx(30.0 + job.spec.iterations / speed, rel=1e-9)
    assert result.summary["semantics"] == "pollux"


def test_pollux_newcomers_start_at_the_next_60s_interval(tmp_path: Path) -> None:
    trace = _pollux_workload(tmp_path, "ncf-0,0,ncf,1,32768\nncf-1,100,ncf,1,32768\n")
    result, rates = _pollux_replay(trace, "las", gpus=4, gpus_per_node=4)
    jobs = {j.id: j for j in result.store.all_jobs()}
    late = jobs["ncf-1"]
    work = late.spec.iterations / rates.iterations_per_second(late, (1,))
    assert late.finished_at == pytest.approx(120.0 + 30.0 + work)


def test_pollux_decides_only_on_its_60s_grid(tmp_path: Path) -> None:
    """Even the first job, on an empty cluster, waits for the next multiple of 60 s."""
    trace = _pollux_workload(tmp_path, "ncf-0,53,ncf,1,32768\nncf-1,1585,ncf,1,32768\n")
    result, rates = _pollux_replay(trace, "las", gpus=4, gpus_per_node=4)
    for job in result.store.all_jobs():
        work = job.spec.iterations / rates.iterations_per_second(job, (1,))
        start = math.ceil(job.submitted_at / 60.0) * 60.0
        assert job.finished_at == pytest.approx(start + 30.0 + work)


def test_tiresias_baseline_backfills_past_a_blocked_gang(tmp_path: Path) -> None:
    """Pollux's Tiresias starts any job that fits the GPUs left; it holds none back for a
    big gang that does not fit (our own las does)."""
    trace = _pollux_workload(
        tmp_path,
        "cifar10-0,0,cifar10,6,2048\ncifar10-1,10,cifar10,4,2048\nncf-2,20,ncf,1,32768\n",
    )
    result, _ = _pollux_replay(trace, "las", gpus=8, gpus_per_node=4)
    starts = [line for line in result.log.lines or [] if " start " in line]
    # cifar10-1 (4 GPUs) cannot fit beside cifar10-0 (6 of 8); ncf-2 (1 GPU) does.
    assert any(line.startswith("60.000 start ncf-2") for line in starts)


@pytest.mark.skipif(not (SHARED / "traces" / "pollux").is_dir(), reason="no ../shared")
def test_las_on_pollux_workload_6_is_within_20_percent_of_pollux_tiresias() -> None:
    """The issue's target: Pollux's own simulator gives about 3,470 s (its Tiresias)."""
    trace = SHARED / "traces" / "pollux" / "workloads" / "workload-6.csv"
    setup = SimulationSetup(gpus=64, gpus_per_node=4)
    oracle = make_oracle(setup)
    rates, arrivals = make_rates(load_jobs(trace, setup, oracle), setup, oracle, trace)
    summary = replay(
        arrivals, "las", rates, oracle, setup, semantics=semantics_for(trace, throughputs=False)
    ).summary
    assert summary["completed"] == 160
    assert abs(summary["avg_jct_s"] / 3_469.69 - 1.0) <= 0.2


def test_curves_missing_a_column_are_refused_with_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "validation-64.csv"
    path.write_text("progress,iteration,metric,grad_sqr\n1.0,10,0.5,2.0\n")
    with pytest.raises(TraceFormatError, match="grad_var") as error:
        read_validation(path)
    assert error.value.line == 1 and str(path) in str(error.value)


def test_curves_with_a_bad_number_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "validation-64.csv"
    path.write_text("progress,iteration,metric,grad_sqr,grad_var\n1,10,0.5,2,3\n2,20,x,2,3\n")
    with pytest.raises(TraceFormatError, match="metric") as error:
        read_validation(path)
    assert error.value.line == 3


def test_a_workload_naming_an_application_without_curves_is_refused(tmp_path: Path) -> None:
    apps = tmp_path / "pollux" / "apps"
    apps.mkdir(parents=True)
    for name in ("placements.csv", "scalability.csv", "validation-128.csv"):
        (apps / "cifar10").mkdir(exist_ok=True)
        (apps / "cifar10" / name).write_bytes((APPS / "cifar10" / name).read_bytes())
    trace = tmp_path / "w.csv"
    trace.write_text(HEADER + "a,0,cifar10,1,128\nb,5,yolov3,1,16\n")
    with pytest.raises(TraceFormatError, match=r"yolov3.*no validation curves") as error:
        load_trace(trace)
    assert error.value.line == 3 and str(trace) in str(error.value)


# -- Gavel: rounds --------------------------------------------------------------------------

RESNET = "ResNet-18 (batch size 16)"
RESNET_RATE = 32.353384328946916  # steps/s on a v100, tests/data/gavel_throughputs_excerpt.json
RESNET_2_RATE = 100.14206200421837  # the same job type on 2 v100s
STEP_S = 1 / RESNET_RATE
"""A trace gives whole steps: work is exact to one step's time."""


def test_a_gavel_newcomer_waits_for_the_running_round_to_end(tmp_path: Path) -> None:
    # A runs 1000 s; B arrives at 100 s on a free GPU: Gavel adds it when the round ends.
    result = _gavel_replay(
        tmp_path, [(RESNET, 1000.0, 0.0), (RESNET, 100.0, 100.0)], "fifo", gpus=2
    )
    b = result.store.get("gavel-000002")
    assert b.finished_at == pytest.approx(360.0 + 100.0, abs=STEP_S)


@pytest.mark.parametrize("policy", ["fifo", "maxmin"])
def test_a_gavel_newcomer_waits_for_the_next_allocation_reset(tmp_path: Path, policy: str) -> None:
    """Resets at 0 and 360 s (Gavel's reset clock starts at 0); the next may come 1,920 s
    after 360 s, at the first round from 2,280 s: 2,520 s. C waits there on a free GPU."""
    result = _gavel_replay(
        tmp_path,
        [(RESNET, 5000.0, 0.0), (RESNET, 5000.0, 100.0), (RESNET, 100.0, 500.0)],
        policy,
        gpus=3,
    )
    started = {
        line.split()[2]: float(line.split()[0])
        for line in result.log.lines or []
        if " start " in line
    }
    assert started == pytest.approx(
        {"gavel-000001": 0.0, "gavel-000002": 360.0, "gavel-000003": 2520.0}
    )


def test_a_gavel_newcomer_on_an_idle_cluster_starts_at_once(tmp_path: Path) -> None:
    result = _gavel_replay(tmp_path, [(RESNET, 50.0, 0.0), (RESNET, 100.0, 500.0)], "fifo", gpus=2)
    late = result.store.get("gavel-000002")
    assert late.finished_at == pytest.approx(500.0 + 100.0, abs=STEP_S)


def test_a_gavel_round_ends_when_its_last_gang_ends(tmp_path: Path) -> None:
    # A finishes at 50 s, alone in its round; B (arrived at 20 s) starts then, not at 360 s.
    result = _gavel_replay(
        tmp_path,
        [
            (RESNET, 50.0, 0.0),
            (RESNET, 100.0, 20.0),
        ],
        "fifo",
        gpus=1,
    )
    b = result.store.get("gavel-000002")
    assert b.finished_at == pytest.approx(50.0 + 100.0, abs=2 * STEP_S)


def test_gavel_maxmin_alternates_two_equal_jobs_round_by_round(tmp_path: Path) -> None:
    result = _gavel_replay(
        tmp_path, [(RESNET, 1440.0, 0.0), (RESNET, 1440.0, 0.0)], "maxmin", gpus=1
    )
    starts = [line.split()[:3] for line in result.log.lines or [] if " start " in line]
    owners = [job for _, _, job in starts]
    times = [float(at) for at, _, _ in starts]
    assert owners[:6] == ["gavel-000001", "gavel-000002"] * 3
    assert times[:6] == pytest.approx([0.0, 360.0, 720.0, 1080.0, 1440.0, 1800.0])
    # No protection and no restart cost: the two finish within one round of each other.
    done = sorted(j.finished_at or 0.0 for j in result.store.all_jobs())
    assert done[1] == pytest.approx(2880.0, abs=2 * STEP_S)


def test_under_gavel_fifo_runs_the_first_job_to_completion(tmp_path: Path) -> None:
    result = _gavel_replay(tmp_path, [(RESNET, 1440.0, 0.0), (RESNET, 1440.0, 0.0)], "fifo", gpus=1)
    done = {j.id: j.finished_at for j in result.store.all_jobs()}
    assert done == pytest.approx({"gavel-000001": 1440.0, "gavel-000002": 2880.0}, abs=2 * STEP_S)
    assert result.summary["preemptions"] == 0


def test_gavel_fifo_allocation_can_hold_more_gangs_than_gpus() -> None:
    """Gavel counts GPUs free while walking its old allocation in arrival order: a finished
    job early in that order hands its place to the queue head before the running jobs after
    it are counted, so a 2-GPU head joins a running 1-GPU job on 2 GPUs."""
    running, head, behind = (
        _job("running", 1, at=1.0),
        _job("head", 2, at=2.0),
        _job("x", 1, at=3.0),
    )
    previous = {"finished": 1.0, "running": 1.0}
    assert gavel_fifo_allocation([running, head, behind], 2, previous) == {
        "running": 1.0,
        "head": 1.0,
    }
    # With GPUs counted first it would not fit, and FIFO never skips its head.
    assert gavel_fifo_allocation([running, head, behind], 2, {"running": 1.0}) == {"running": 1.0}


def test_gavel_fifo_time_slices_an_over_full_allocation(tmp_path: Path) -> None:
    """A ends at 100 s; the reset at 360 s (the second may follow the one at 0 at once) gives
    its place to the 2-GPU C beside the running B on 2 GPUs. B and C then take turns by
    Gavel's priority, where a strict FIFO would make C wait for B's 10,000 s."""
    result = _gavel_replay(
        tmp_path,
        [(RESNET, 100.0, 0.0), (RESNET, 10_000.0, 0.0), (RESNET, 10_000.0, 0.0)],
        "fifo",
        gpus=2,
        scales={3: 2},
    )
    lines = [line.split()[:3] for line in result.log.lines or []]
    assert lines[:5] == [
        ["0.000", "start", "gavel-000001"],
        ["0.000", "start", "gavel-000002"],
        ["720.000", "preempt", "gavel-000002"],
        ["720.000", "start", "gavel-000003"],
        ["1080.000", "preempt", "gavel-000003"],
    ]


def test_gavel_resets_at_once_when_nothing_runs_and_all_have_arrived(tmp_path: Path) -> None:
    """Resets at 0, at 100 s (A ended; the reset clock still read 0) and, when B ends at
    200 s, at once again: Gavel's simulator restarts its reset clock when nothing runs and
    every job has arrived. Without that, C (never allocated) would wait for 1,920 s after
    the reset at 100 s, on an idle cluster; here the replay gave up on it."""
    result = _gavel_replay(
        tmp_path, [(RESNET, 100.0, 0.0), (RESNET, 100.0, 0.0), (RESNET, 50.0, 0.0)], "fifo", gpus=1
    )
    c = result.store.get("gavel-000003")
    assert c.finished_at == pytest.approx(250.0, abs=3 * STEP_S)


def test_a_job_type_without_throughput_for_the_worker_type_is_refused(tmp_path: Path) -> None:
    trace = tmp_path / "t.trace"
    trace.write_text(_gavel_line("LM (batch size 20)", 100, 0.0))
    setup = SimulationSetup(
        gpus=4, gpus_per_node=4, throughputs=DATA / "gavel_throughputs_excerpt.json"
    )
    oracle = make_oracle(setup)
    jobs = load_jobs(trace, setup, oracle)
    with pytest.raises(InvalidSpecError, match=r"LM \(batch size 20\)"):
        make_rates(jobs, setup, oracle, trace)


def test_semantics_follow_the_trace_format() -> None:
    assert semantics_for(DATA / "philly_excerpt.csv", throughputs=False) is JIGSAW
    assert semantics_for(DATA / "pollux_workload_excerpt.csv", throughputs=False) is POLLUX
    assert semantics_for(DATA / "gavel_excerpt.trace", throughputs=True) is GAVEL
    # Without measured throughputs a Gavel trace runs on our oracle, under our rules.
    assert semantics_for(DATA / "gavel_excerpt.trace", throughputs=False) is JIGSAW


# -- helpers --------------------------------------------------------------------------------


def _pollux_workload(tmp_path: Path, rows: str) -> Path:
    root = tmp_path / "pollux"
    (root / "workloads").mkdir(parents=True)
    (root / "apps").symlink_to(APPS, target_is_directory=True)
    trace = root / "workloads" / "w.csv"
    trace.write_text(HEADER + rows)
    return trace


def _pollux_replay(
    trace: Path, policy: str, **setup_options: int
) -> tuple[ReplayResult, PolluxRate]:
    setup = SimulationSetup(keep_log=True, **setup_options)  # type: ignore[arg-type]
    oracle = make_oracle(setup)
    jobs = load_jobs(trace, setup, oracle)
    rates, arrivals = make_rates(jobs, setup, oracle, trace)
    assert isinstance(rates, PolluxRate)
    result = replay(arrivals, policy, rates, oracle, setup, semantics=POLLUX)
    return result, rates


def _gavel_line(job_type: str, steps: int, arrival: float, scale: int = 1) -> str:
    return f"{job_type}\tcmd\tdir\t--steps\t1\t{steps}\t{scale}\t1\t-1\t{arrival}\n"


def _gavel_replay(
    tmp_path: Path,
    jobs: list[tuple[str, float, float]],
    policy: str,
    *,
    gpus: int,
    scales: dict[int, int] | None = None,
) -> ReplayResult:
    """``jobs``: (job type, seconds of work alone on a v100, arrival); ``scales``: GPUs of
    the job on that trace line (1-based), 1 by default."""
    trace = tmp_path / "t.trace"
    rate = {(RESNET, 1): RESNET_RATE, (RESNET, 2): RESNET_2_RATE}
    scale_of = scales or {}
    lines = []
    for line, (kind, seconds, at) in enumerate(jobs, start=1):
        scale = scale_of.get(line, 1)
        lines.append(_gavel_line(kind, int(seconds * rate[kind, scale]), at, scale))
    trace.write_text("".join(lines))
    throughputs = DATA / "gavel_throughputs_excerpt.json"
    setup = SimulationSetup(
        gpus=gpus,
        gpus_per_node=4,
        throughputs=throughputs,
        worker_type="v100",
        round_s=GAVEL.round_s,
        keep_log=True,
    )
    oracle = make_oracle(setup)
    loaded = load_jobs(trace, setup, oracle)
    rates, arrivals = make_rates(loaded, setup, oracle, trace)
    return replay(arrivals, policy, rates, oracle, setup, semantics=GAVEL)


def test_per_node_counts_groups_a_placement_by_node() -> None:
    assert per_node_counts(((0, 0), (0, 1), (3, 0))) == (2, 1)
    assert per_node_counts(((2, 1),)) == (1,)


def test_reference_rate_is_compact(tmp_path: Path) -> None:
    trace = _pollux_workload(tmp_path, "c,0,cifar10,6,2048\n")
    setup = SimulationSetup(gpus=8, gpus_per_node=4)
    oracle = make_oracle(setup)
    rates, arrivals = make_rates(load_jobs(trace, setup, oracle), setup, oracle, trace)
    assert isinstance(rates, PolluxRate)
    job = Job(id="c", spec=arrivals[0].spec, submitted_at=0.0)
    assert rates.reference_rate(job) == rates.iterations_per_second(job, (4, 2))


# -- Gavel: max-min ranking -----------------------------------------------------------------


def _job(job_id: str, workers: int, *, at: float = 0.0) -> Job:
    spec = JobSpec(name=job_id, model="mlp", workers=workers, iterations=100)
    return Job(id=job_id, spec=spec, submitted_at=at)


def _ids(jobs: list[Job]) -> list[str]:
    return [job.id for job in jobs]


def test_gavel_allocation_gives_every_job_the_same_gpu_share_when_loaded() -> None:
    jobs = [_job("one", 1), _job("four", 4), _job("two", 2)]
    shares = gavel_allocation(jobs, capacity=3)
    gpu_share = {job.id: shares[job.id] * job.spec.workers for job in jobs}
    assert gpu_share == pytest.approx(dict.fromkeys(gpu_share, 1.0))
    assert shares["four"] == pytest.approx(shares["one"] / 4)


@pytest.mark.parametrize(
    ("capacity", "workers", "ecos"),
    [
        # Gavel's LP solved by its own code and solver (cvxpy + ECOS, /work/peers/gavel).
        (4, (1, 4), (1.0, 0.4995)),
        (4, (1, 2, 2), (1.0, 0.6432, 0.6432)),
        (8, (1, 4, 2), (1.0, 0.6462, 0.7453)),
    ],
)
def test_gavel_allocation_leaves_the_lp_leftover_where_an_interior_point_solver_does(
    capacity: int, workers: tuple[int, ...], ecos: tuple[float, ...]
) -> None:
    """Past the max-min level (every job gets 1 GPU here) the LP is indifferent; Gavel's
    solver stops inside that face, near its analytic centre, not at a water-filled corner
    (which gave the 4-GPU gang 0.75 on 4 GPUs)."""
    jobs = [_job(f"j{i}", n) for i, n in enumerate(workers)]
    shares = gavel_allocation(jobs, capacity)
    assert [shares[job.id] for job in jobs] == pytest.approx(list(ecos), abs=0.025)
    assert sum(shares[job.id] * job.spec.workers for job in jobs) < capacity


def test_gavel_priorities_restart_at_a_reset_and_break_ties_by_deficit() -> None:
    """Between resets a job's priority is x / (half a round + the time it ran since the
    reset). At a reset (here: a newcomer) every count restarts; the job owed most over the
    last interval (x times the interval minus what it ran) goes first, not the newcomer."""
    priorities = GavelPriorities()

    def round_of(jobs: list[Job], now: float) -> list[str]:
        ranked = _ids(priorities.order(jobs, now, capacity=1))
        priorities.end_round(jobs, now, capacity=1)  # the cycle's step after apply
        return ranked

    a, b = _job("a", 1), _job("b", 1)
    assert round_of([a, b], 0.0) == ["a", "b"]
    a = replace(a, attained_gpu_seconds=360.0)
    assert round_of([a, b], 360.0) == ["b", "a"]
    # Until 2,000 s a ran 1,080 s and b 720 s; each was owed half of the 2,000 s.
    a = replace(a, attained_gpu_seconds=1080.0)
    b = replace(b, attained_gpu_seconds=720.0)
    c = _job("c", 1, at=1900.0)
    kept = priorities.state
    assert _ids(priorities.order([a, b, c], 2000.0, capacity=1)) == ["b", "c", "a"]
    assert priorities.state is kept  # ranking resets nothing: end_round does
    assert round_of([a, b, c], 2000.0) == ["b", "c", "a"]
    assert priorities.state.deficits == pytest.approx({"a": -80.0, "b": 280.0, "c": 0.0})


def test_gavel_maxmin_shares_job_time_not_gpu_time(tmp_path: Path) -> None:
    """Two 1-GPU jobs and a 2-GPU gang on 2 GPUs: x = 2/3, 2/3, 1/3, equal GPU shares.
    Gavel compares each job's own run time with x, so the gang runs every third round
    (ranking by GPU-seconds over x ran it every fourth)."""
    result = _gavel_replay(
        tmp_path,
        [(RESNET, 20_000.0, 0.0), (RESNET, 20_000.0, 0.0), (RESNET, 20_000.0, 0.0)],
        "maxmin",
        gpus=2,
        scales={3: 2},
    )
    starts = [
        float(line.split()[0])
        for line in result.log.lines or []
        if " start gavel-000003 " in line and float(line.split()[0]) < 3000.0
    ]
    assert starts == pytest.approx([360.0, 1440.0, 2520.0])


def test_gavel_rounds_run_whole_steps(tmp_path: Path) -> None:
    """Gavel runs floor(rate x 360) steps a round: 5 rounds of A's 1,800 s leave one step,
    and A needs a sixth round, which it gets only after B's turn (maxmin alternates)."""
    result = _gavel_replay(
        tmp_path, [(RESNET, 1800.0, 0.0), (RESNET, 10_000.0, 0.0)], "maxmin", gpus=1
    )
    a = result.store.get("gavel-000001")
    one_step = 360.0 / math.floor(RESNET_RATE * 360.0)
    assert a.finished_at == pytest.approx(3600.0 + one_step, abs=1e-6)


def test_gavel_jobs_arriving_together_keep_the_trace_order(tmp_path: Path) -> None:
    """Gavel breaks ties by job id, the trace line: line 10 comes after line 9, not after
    line 1 as a text sort of the ids put it."""
    result = _gavel_replay(tmp_path, [(RESNET, 10.0, 0.0)] * 11, "fifo", gpus=1)
    order = [line.split()[2] for line in result.log.lines or [] if " start " in line]
    assert order == [f"gavel-{line:06d}" for line in range(1, 12)]


def test_maxmin_refuses_an_unknown_ranking() -> None:
    with pytest.raises(ValueError, match="ranking"):
        MaxMinPolicy(Planner(), ranking="random")
