"""jigsaw's cluster-level plan choice: a running auto gang switches to SPB in place so waiting
one-worker jobs run time-sliced in its slack, and switches back when they are gone."""

from __future__ import annotations

import pytest

from jigsaw.model.cluster import Cluster
from jigsaw.model.decisions import Preempt, Replan, Start
from jigsaw.model.domain import Job, JobSpec, transition
from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.lifecycle import JobState
from jigsaw.model.plan import SPBPlan, full_backprop, uniform
from jigsaw.model.snapshot import Snapshot
from jigsaw.oracle import Oracle
from jigsaw.policies.jigsaw import JigsawConfig, JigsawPolicy
from jigsaw.policies.options import policy_options
from jigsaw.simulator import SimulationSetup, make_oracle
from jigsaw.simulator.rates import OracleRate
from jigsaw.simulator.replay import Replay, ReplayOptions, ReplayResult
from jigsaw.simulator.workload import Arrival
from jigsaw.traces import TraceJob

MIB = 2**20
JOBS = (
    ("j0", "resnet50_32", 4, 3600.0),
    ("j1", "resnet50_32", 4, 3600.0),
    ("j2", "resnet18_32", 1, 1800.0),
    ("j3", "resnet18_32", 1, 1800.0),
    ("j4", "vgg16_32", 1, 1800.0),
)


def _arrivals(oracle: Oracle) -> list[Arrival]:
    arrivals = []
    for index, (job_id, model, workers, seconds) in enumerate(JOBS):
        rate = oracle.full_rate(model, 32, workers, 4)
        spec = JobSpec(job_id, model, workers, round(seconds * rate), batch_size=32)
        at = 10.0 * index
        arrivals.append(Arrival(job_id, at, spec, TraceJob(job_id, at, workers, model, 32)))
    return arrivals


def _replay(config: JigsawConfig | None = None, *, gpu_memory: int | None = None) -> ReplayResult:
    oracle = make_oracle(SimulationSetup())
    memory = gpu_memory if gpu_memory is not None else oracle.hardware.memory_bytes
    cluster = Cluster.uniform(8, 4, gpu_memory_bytes=memory)
    policy = JigsawPolicy(oracle, config=config)
    return Replay(
        _arrivals(oracle), policy, OracleRate(oracle, 4), cluster, ReplayOptions(keep_log=True)
    ).run()


def test_a_gang_switches_to_spb_in_place_and_one_worker_jobs_run_in_its_slack() -> None:
    result = _replay()
    lines = result.log.lines
    assert lines is not None
    switch = next(i for i, line in enumerate(lines) if line.split()[1:3] == ["replan", "j0"])
    assert "plan=0,3,3,3" in lines[switch] and "slack for j2, j3, j4" in lines[switch]
    packed = [line for line in lines if " start " in line and "packed into j0" in line]
    assert [line.split()[2] for line in packed] == ["j2", "j3", "j4"]
    # Each guest is on one of the host's partial GPUs, never on rank 0's.
    assert {line.split("gpus=")[1].split()[0] for line in packed} == {"0:1", "0:2", "0:3"}
    # Once the guests are gone, the host goes back to full backprop, in place.
    back = [line for line in lines[switch + 1 :] if line.split()[1:3] == ["replan", "j0"]]
    assert back and "plan=0,0,0,0" in back[0]
    assert result.summary["packed_starts"] == 3
    assert all(job.state == JobState.SUCCEEDED for job in result.store.all_jobs())
    for job in result.store.all_jobs():
        assert job.iterations_done == job.spec.iterations


def test_without_packing_nothing_shares_a_gpu_and_nothing_re_plans() -> None:
    result = _replay(JigsawConfig(packing=False))
    assert result.summary["packed_starts"] == 0
    assert result.summary["replans"] == 0


def test_memory_is_a_hard_limit_on_a_shared_gpu() -> None:
    oracle = make_oracle(SimulationSetup())
    host_partial = oracle.worker_memory_bytes("resnet50_32", 32, _uniform3(oracle), 3)
    guest = oracle.worker_memory_bytes("resnet18_32", 32, _full(oracle, "resnet18_32"), 0)
    full_host = oracle.worker_memory_bytes("resnet50_32", 32, _full(oracle, "resnet50_32"), 0)
    vgg_guest = oracle.worker_memory_bytes("vgg16_32", 32, _full(oracle, "vgg16_32"), 0)
    too_small = host_partial + min(guest, vgg_guest) - MIB
    assert too_small >= full_host  # the gangs alone still fit
    assert _replay(gpu_memory=too_small).summary["packed_starts"] == 0
    roomy = host_partial + max(guest, vgg_guest) + MIB
    assert _replay(gpu_memory=roomy).summary["packed_starts"] == 3


def test_the_plan_hold_bounds_re_plans_but_not_the_switch_back() -> None:
    """The hold bounds the switches that give goodput up for slack; the switch back once the
    guests are gone raises goodput, cannot flap, and is not held (a host left on SPB with no
    guest pays eta for nothing)."""
    result = _replay(JigsawConfig(min_plan_hold_s=1e9))
    lines = result.log.lines
    assert lines is not None
    replans = [line for line in lines if line.split()[1:3] == ["replan", "j0"]]
    assert len(replans) == 2
    assert "plan=0,3,3,3" in replans[0] and "plan=0,0,0,0" in replans[1]
    last_guest_end = max(
        job.finished_at or 0.0 for job in result.store.all_jobs() if job.id in {"j2", "j3", "j4"}
    )
    switched_back = float(replans[1].split()[0])
    assert last_guest_end <= switched_back <= last_guest_end + 60.0  # the next round


def test_the_fairness_guard_is_a_choice_and_maxmin_makes_no_stability_promise() -> None:
    oracle = make_oracle(SimulationSetup())
    policy = JigsawPolicy(oracle, config=JigsawConfig(base="maxmin"))
    snapshot = Snapshot(0.0, Cluster.uniform(8, 4), (), ())
    assert policy.stable_until(snapshot) is None
    assert JigsawPolicy(oracle).stable_until(snapshot) is not None
    result = _replay(JigsawConfig(base="maxmin"))
    assert result.summary["completed"] == len(JOBS)


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ({"base": "fifo"}, "base must be one of las, maxmin"),
        ({"pack_gain": -0.1}, "pack_gain"),
        ({"host_keep": 1.5}, "host_keep"),
        ({"min_plan_hold_s": -1}, "min_plan_hold_s"),
        ({"load_threshold": 4.5}, "load_threshold"),
    ],
)
def test_bad_options_are_named(raw: dict[str, object], named: str) -> None:
    with pytest.raises(InvalidSpecError, match=named):
        policy_options("jigsaw", {"config": raw})


def test_options_from_json() -> None:
    options = policy_options(
        "jigsaw", {"config": {"base": "maxmin", "pack_gain": 0.5, "host_keep": 0.2}}
    )
    assert options["config"] == JigsawConfig(base="maxmin", pack_gain=0.5, host_keep=0.2)


def _full(oracle: Oracle, model: str) -> SPBPlan:
    return full_backprop(1, oracle.num_blocks(model))


def _uniform3(oracle: Oracle) -> SPBPlan:
    return uniform(4, oracle.num_blocks("resnet50_32"), 3)


def _running(
    job_id: str, workers: int, gpus: tuple[tuple[int, int], ...], priority: int, oracle: Oracle
) -> Job:
    spec = JobSpec(job_id, "resnet50_32", workers, 10**6, batch_size=32, priority=priority)
    job = Job(job_id, spec, submitted_at=0.0)
    plan = full_backprop(workers, oracle.num_blocks("resnet50_32"))
    job, _ = transition(
        job, JobState.ADMITTED, reason="t", at=0.0, actor="t", placement=gpus, plan=plan
    )
    job, _ = transition(job, JobState.RUNNING, reason="t", at=0.0, actor="t")
    return job


def test_a_guest_that_frees_no_gpu_is_not_preempted() -> None:
    oracle = make_oracle(SimulationSetup())
    host = _running("host", 2, ((0, 0), (0, 1)), 0, oracle)
    guest = _running("guest", 1, ((0, 1),), -1, oracle)
    other = _running("other", 2, ((0, 2), (0, 3)), 0, oracle)
    spec = JobSpec("w", "resnet50_32", 2, 10**6, batch_size=32, priority=2)
    waiting = Job("w", spec, submitted_at=100.0)
    now = 10 * 3600.0
    snapshot = Snapshot(now, Cluster.uniform(4, 4), (waiting,), (guest, host, other))
    decisions = JigsawPolicy(oracle).decide(snapshot)
    preempted = {d.job_id for d in decisions if isinstance(d, Preempt)}
    assert preempted == {"other"}
    start = next(d for d in decisions if isinstance(d, Start))
    assert set(start.placement) == {(0, 2), (0, 3)}


def _host_and_guests(host_done: float, guest_iterations: int, oracle: Oracle) -> Snapshot:
    """A 4-worker auto host filling a 4-GPU node, ``host_done`` of its 10,000 iterations
    done, and three waiting one-worker jobs of ``guest_iterations`` each."""
    host = _running("host", 4, ((0, 0), (0, 1), (0, 2), (0, 3)), 0, oracle)
    host = Job(
        host.id,
        JobSpec("host", "resnet50_32", 4, 10_000, batch_size=32),
        submitted_at=0.0,
        state=host.state,
        plan=host.plan,
        placement=host.placement,
        started_at=0.0,
        run_started_at=3600.0,
        iterations_done=host_done * 10_000,
    )
    guests = tuple(
        Job(
            f"g{i}",
            JobSpec(f"g{i}", "resnet18_32", 1, guest_iterations, batch_size=32),
            submitted_at=3600.0,
        )
        for i in range(3)
    )
    cluster = Cluster.uniform(4, 4, gpu_memory_bytes=oracle.hardware.memory_bytes)
    return Snapshot(3600.0, cluster, guests, (host,))


@pytest.mark.parametrize("guard", [True, False])
def test_long_guests_do_not_slow_a_host_near_its_end(guard: bool) -> None:
    """The completion guard: packing must also raise sum(speed / remaining seconds). Guests
    longer than the host has left would delay the host more than they gain; short ones are
    welcome. Without the guard only summed normalised goodput counts, and both pack."""
    oracle = make_oracle(SimulationSetup())
    config = JigsawConfig(completion_guard=guard, min_plan_hold_s=0.0)

    def packed(host_done: float, guest_iterations: int) -> int:
        decisions = JigsawPolicy(oracle, config=config).decide(
            _host_and_guests(host_done, guest_iterations, oracle)
        )
        return sum(isinstance(d, Start) for d in decisions)

    assert packed(0.0, 200) == 3  # short guests next to a host with everything left
    assert packed(0.95, 100_000) == (0 if guard else 3)  # long guests, a host near its end


def test_no_gang_is_re_planned_to_the_plan_it_runs() -> None:
    """A re-plan in place compares plans on the gang's own GPUs: a host spread over two
    nodes, with guests on its partial GPUs leaving room for its current plan only, must not
    "improve" to the plan it already runs (an option's goodput is the compact, exclusive
    one; each such re-plan costs a lease boundary, and 4,000 Philly jobs made 18,558)."""
    oracle = make_oracle(SimulationSetup())
    blocks = oracle.num_blocks("resnet50_32")
    spread = ((0, 0), (0, 1), (1, 0), (1, 1))
    running = _running("host", 4, spread, 0, oracle)
    host = Job(
        running.id,
        running.spec,
        submitted_at=0.0,
        state=running.state,
        plan=uniform(4, blocks, 3),
        placement=spread,
        started_at=0.0,
        run_started_at=0.0,
    )
    guests = tuple(_running(f"g{i}", 1, (gpu,), 0, oracle) for i, gpu in enumerate(spread[1:]))
    catalog = JigsawPolicy(oracle).catalog
    partial = max(
        load for gpu, load, _ in catalog.footprint(host, host.plan, spread) if gpu != spread[0]
    )
    guest = max(load for _, load, _ in catalog.footprint(guests[0], guests[0].plan, spread[1:2]))
    current = next(o.goodput for o in catalog.options(host) if o.plan == host.plan)
    assert catalog.goodput(host, host.plan, spread) * 1.05 < current  # slower than compact
    cluster = Cluster.uniform(8, 4, gpu_memory_bytes=oracle.hardware.memory_bytes)
    policy = JigsawPolicy(
        oracle, config=JigsawConfig(min_plan_hold_s=0.0, load_threshold=partial + guest + 1e-6)
    )
    decisions = policy.decide(Snapshot(3600.0, cluster, (), (host, *guests)))
    assert not [d for d in decisions if isinstance(d, Replan)]
