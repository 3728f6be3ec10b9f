"""Time-slicing on shared GPUs: the model (jigsaw/oracle/timeslicing.py) and the simulated
executor that uses it."""

from __future__ import annotations

import random

import pytest

from jigsaw.model.cluster import Placement
from jigsaw.model.domain import Job, JobSpec
from jigsaw.model.hardware import preset
from jigsaw.model.plan import full_backprop, staircase
from jigsaw.oracle import GangTiming, Oracle, timesliced_iteration_times
from jigsaw.oracle.timeslicing import turn_cycle
from jigsaw.simulator.rate_executor import RateDrivenExecutor
from jigsaw.simulator.rates import OracleRate

G0, G1 = (0, 0), (0, 1)


def test_gated_partial_worker_next_to_a_long_job_waits_a_whole_turn() -> None:
    times = timesliced_iteration_times(
        {
            "host": GangTiming(1.0, ((G1, 0.4), ((0, 2), 1.0))),
            "guest": GangTiming(1.0, ((G1, 1.0),)),
        }
    )
    assert times == pytest.approx({"host": 1.4, "guest": 1.4})


def test_short_iterations_fill_a_gated_worker_idle_time() -> None:
    times = timesliced_iteration_times(
        {
            "host": GangTiming(1.0, ((G1, 0.4),)),
            "guest": GangTiming(0.1, ((G1, 0.1),)),
        }
    )
    assert times["host"] == pytest.approx(1.0)
    assert times["guest"] == pytest.approx(0.1 / 0.6)


def test_two_always_ready_jobs_alternate_and_full_backprop_costs_more_than_spb() -> None:
    full = timesliced_iteration_times(
        {
            "a": GangTiming(1.0, ((G0, 1.0),)),
            "b": GangTiming(1.0, ((G0, 1.0),)),
        }
    )
    assert full == pytest.approx({"a": 2.0, "b": 2.0})
    spb = timesliced_iteration_times(
        {
            "a": GangTiming(1.0, ((G0, 0.3),)),
            "b": GangTiming(1.0, ((G0, 1.0),)),
        }
    )
    assert spb["a"] < full["a"] and spb["b"] < full["b"]


def test_nothing_shared_keeps_alone_time_exactly() -> None:
    times = timesliced_iteration_times(
        {
            "a": GangTiming(0.37, ((G0, 0.3),)),
            "b": GangTiming(0.5, ((G1, 0.5),)),
        }
    )
    assert times == {"a": 0.37, "b": 0.5}


def test_gpu_time_is_conserved_and_nobody_beats_alone() -> None:
    rng = random.Random(7)
    for _ in range(300):
        gangs: dict[str, GangTiming] = {}
        for index in range(rng.randint(2, 5)):
            alone = rng.uniform(0.05, 2.0)
            gpus = rng.sample([(0, g) for g in range(3)], rng.randint(1, 2))
            gangs[f"j{index}"] = GangTiming(
                alone, tuple((gpu, alone * rng.uniform(0.05, 1.0)) for gpu in gpus)
            )
        times = timesliced_iteration_times(gangs)
        used: dict[tuple[int, int], float] = {}
        for job_id, timing in gangs.items():
            assert times[job_id] >= timing.alone_s - 1e-12
            for gpu, busy in timing.busy_s:
                used[gpu] = used.get(gpu, 0.0) + busy / times[job_id]
        assert max(used.values()) <= 1.0 + 1e-6


def test_turn_cycle_solves_its_equation() -> None:
    for others in ([], [(1.0, 1.0)], [(0.1, 0.1), (0.5, 3.0)], [(2.0, 0.5)]):
        cycle = turn_cycle(0.4, others)
        assert cycle == pytest.approx(0.4 + sum(b * min(1.0, cycle / t) for b, t in others))


def _job(job_id: str, workers: int, model: str = "resnet50_32") -> Job:
    return Job(job_id, JobSpec(job_id, model, workers, 10**6, batch_size=32), submitted_at=0.0)


def test_executor_times_co_located_gangs_with_the_model() -> None:
    oracle = Oracle(preset("v100"))
    rates = OracleRate(oracle, 8)
    executor = RateDrivenExecutor(rates)
    host, guest = _job("host", 4), _job("guest", 1, "resnet18_32")
    host_plan = staircase(4, oracle.num_blocks("resnet50_32"))
    host_gpus: Placement = ((0, 0), (0, 1), (0, 2), (0, 3))
    guest_plan = full_backprop(1, oracle.num_blocks("resnet18_32"))
    executor.start(host, host_gpus, host_plan)
    alone = executor._gangs["host"].rate
    executor.start(guest, ((0, 3),), guest_plan)
    expected = timesliced_iteration_times(
        {
            "host": oracle.timing("resnet50_32", 32, host_plan, host_gpus),
            "guest": oracle.timing("resnet18_32", 32, guest_plan, ((0, 3),)),
        }
    )
    eta = oracle.eta("resnet50_32", host_plan)
    assert executor._gangs["host"].rate == pytest.approx(eta / expected["host"])
    assert executor._gangs["guest"].rate == pytest.approx(1.0 / expected["guest"])
    assert executor._gangs["host"].rate <= alone
    executor.poll(100.0)
    executor.stop("guest", checkpoint=False)
    assert executor._gangs["host"].rate == pytest.approx(alone)
    assert executor.shared_gpu_seconds == pytest.approx(100.0)
    assert executor.guest_gpu_seconds == pytest.approx(100.0)
    guest_busy = dict(oracle.timing("resnet18_32", 32, guest_plan, ((0, 3),)).busy_s)[(0, 3)]
    assert executor.guest_compute_seconds == pytest.approx(100.0 * guest_busy / expected["guest"])
