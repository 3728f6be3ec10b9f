"""jigsaw's levers are pulled exactly when the objective says they pay, and never otherwise;
no job starves; its decisions on three tiny clusters are pinned."""

from __future__ import annotations

import math
import random
import re
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from jigsaw.model.cluster import Cluster
from jigsaw.model.decisions import Preempt, Replan, Resize, Start
from jigsaw.model.domain import Job, JobSpec
from jigsaw.model.plan import Plan, full_backprop
from jigsaw.model.snapshot import Snapshot
from jigsaw.planning.catalog import ModelCatalog
from jigsaw.planning.planner import Planner
from jigsaw.policies.allocator.configurations import Problem
from jigsaw.policies.allocator.solve import solve_exclusive
from jigsaw.policies.jigsaw import JigsawConfig, JigsawPolicy
from jigsaw.simulator import SimulationSetup, load_jobs, make_oracle, make_rates, replay
from tests.core.policies.test_allocator_containment import FixedSource, _goodput
from tests.core.support import running_job

ORACLE = make_oracle(SimulationSetup())
PLANNER = Planner(ORACLE.hardware, catalog=ModelCatalog(ORACLE.profiles))
ELASTIC = {
    "min_workers": 1,
    "max_workers": 8,
    "batch_policy": "adaptive",
    "min_global_batch": 64,
    "max_global_batch": 4096,
}


def _policy(config: JigsawConfig | None = None, **kwargs: object) -> JigsawPolicy:
    return JigsawPolicy(ORACLE, PLANNER, config=config, **kwargs)  # type: ignore[arg-type]


# -- a resize happens exactly when it pays ---------------------------------------------------


def _lone_elastic(age: float, resizes: int) -> tuple[Snapshot, FixedSource]:
    """One elastic job on 2 of 8 GPUs, measured up to 4 (so it may take 8), ``age`` old."""
    now = 10_000.0
    spec = JobSpec("e", "resnet18_32", 2, 10**6, batch_size=64, **ELASTIC)
    job = running_job(spec, ((0, 0), (0, 1)), full_backprop(2, 4), now - age)
    job = replace(job, submitted_at=now - age, resizes=resizes, attempt=1)
    source = FixedSource({"e": _goodput(random.Random(7), 4)})
    return Snapshot(now, Cluster.uniform(8, 4), (), (job,)), source


@pytest.mark.parametrize("age", [60.0, 100.0, 130.0, 200.0, 400.0, 1_000.0, 10_000.0])
def test_a_resize_happens_exactly_when_the_discounted_speedup_beats_keeping(age: float) -> None:
    snapshot, source = _lone_elastic(age, resizes=3)
    policy = _policy(JigsawConfig(guests=False), goodput=source)
    result = policy.solve_round(snapshot)
    assert result is not None
    columns = [result.problem.columns[i] for i in result.problem.by_job[0]]
    keep = next(c for c in columns if c.gpus == 2)
    discount = max(age - 3 * 30.0, 0.0) / (age + 30.0)
    best = max(c.speedup for c in columns if c.gpus not in (0, 2))
    decisions = policy.decide(snapshot)
    if best * discount > keep.speedup:
        (resize,) = decisions
        assert isinstance(resize, Resize) and len(resize.placement) > 2
        assert resize.reason.startswith("jigsaw: grew 2→") and "goodput +" in resize.reason
    else:
        assert decisions == []


def test_the_resize_sweep_sees_both_answers() -> None:
    """The parametrised test above must see resizes and their absence."""
    outcomes = {
        bool(_policy(JigsawConfig(guests=False), goodput=source).decide(snapshot))
        for snapshot, source in (_lone_elastic(a, 3) for a in (60.0, 10_000.0))
    }
    assert outcomes == {True, False}


# -- a pack happens exactly when it pays -----------------------------------------------------

NOW = 3_600.0


def _host_and_guests(guests: int, age: float) -> Snapshot:
    """A 4-worker ``spb: auto`` resnet50 gang (ImageNet-sized, batch 128: its partial ranks
    idle long enough for a guest's turn) filling a 4-GPU node, and ``guests`` waiting
    one-worker resnet18 jobs, ``age`` old. The host started 10 minutes ago, so it is
    protected (``min_run_s``): with its long work left, the exclusive optimum would otherwise
    preempt it for the short guests, which the completion guard prefers to packing them."""
    spec = JobSpec("host", "resnet50_224", 4, 10**6, batch_size=128)
    host = running_job(spec, ((0, 0), (0, 1), (0, 2), (0, 3)), _full(4), NOW - 600.0)
    waiting = tuple(
        Job(f"g{i}", JobSpec(f"g{i}", "resnet18_32", 1, 10**5, batch_size=32), NOW - age)
        for i in range(guests)
    )
    cluster = Cluster.uniform(4, 4, gpu_memory_bytes=ORACLE.hardware.memory_bytes)
    return Snapshot(NOW, cluster, waiting, (host,))


def _full(workers: int) -> Plan:
    return full_backprop(workers, ORACLE.num_blocks("resnet50_224"))


@pytest.mark.parametrize("eta", [0.55, 0.7, 0.8, 0.9, 1.0])
@pytest.mark.parametrize("guests", [1, 3])
def test_a_pack_happens_exactly_when_it_lowers_the_objective(eta: float, guests: int) -> None:
    snapshot = _host_and_guests(guests, age=600.0)
    policy = _policy(eta_of=lambda model, plan: eta)
    result = policy.solve_round(snapshot)
    assert result is not None
    pays = result.solution.cost < solve_exclusive(result.problem).cost
    decisions = policy.decide(snapshot)
    replans = [d for d in decisions if isinstance(d, Replan)]
    packed = [d for d in decisions if isinstance(d, Start) and "packed into host" in d.reason]
    if pays:
        assert [d.job_id for d in replans] == ["host"] and packed
        # The reason names the guests and what the host and they make together against the
        # host alone; the cluster's summed goodput is never below the exclusive answer's (a
        # job does less only where the cluster does more).
        assert re.search(r"slack for g0.*goodput of it and its guests [+-]\d+%", replans[0].reason)
        chosen = sum(result.problem.columns[i].speedup for i in result.solution.chosen)
        alone = sum(
            result.problem.columns[i].speedup for i in solve_exclusive(result.problem).chosen
        )
        assert chosen >= alone * (1 - 1e-9)
        assert not any(isinstance(d, Preempt) for d in decisions)
    else:
        assert replans == [] and packed == []


def test_a_free_gpu_beats_a_slot() -> None:
    """The same guest with a GPU of its own on a second node: packing no longer pays."""
    snapshot = _host_and_guests(1, age=600.0)
    policy = _policy(eta_of=lambda model, plan: 1.0)
    assert any(isinstance(d, Replan) for d in policy.decide(snapshot))
    roomy = Cluster.uniform(8, 4, gpu_memory_bytes=ORACLE.hardware.memory_bytes)
    (start,) = policy.decide(replace(snapshot, cluster=roomy))
    assert isinstance(start, Start) and start.placement[0][0] == 1
    assert start.reason == "jigsaw: start on 1 GPUs"


def _completion_rate(problem: Problem, chosen: Sequence[int]) -> float:
    """The completion guard's quantity: each job's speedup at its pace, less each host's
    worst guest's loss at the host's pace."""
    columns = [problem.columns[index] for index in chosen]
    rate = sum(c.speedup * problem.pace[c.job] for c in columns)
    worst: dict[int, float] = {}
    for c in columns:
        if c.kind == "guest" and c.needs is not None:
            worst[c.needs] = max(worst.get(c.needs, 0.0), c.host_loss)
    return rate - sum(loss * problem.pace[problem.columns[h].job] for h, loss in worst.items())


def test_the_completion_guard_keeps_guests_off_a_host_near_its_end() -> None:
    """The same pack, its host 3,000 iterations from done: the goodput row alone takes it,
    but the guests' hours of work slow a host with minutes left, and the touched jobs'
    completion rate falls; with the guard (the default) nobody is packed."""
    snapshot = _host_and_guests(3, age=600.0)
    (host,) = snapshot.running
    near_end = replace(host, spec=replace(host.spec, iterations=3_000))
    snapshot = replace(snapshot, running=(near_end,))
    unguarded = _policy(JigsawConfig(completion_guard=False))
    assert [type(d).__name__ for d in unguarded.decide(snapshot)] == [
        "Replan",
        "Start",
        "Start",
        "Start",
    ]
    guarded = _policy()
    assert guarded.decide(snapshot) == []
    result = guarded.solve_round(snapshot)
    loose = unguarded.solve_round(snapshot)
    assert result is not None and loose is not None and result.problem.pace
    exclusive = solve_exclusive(result.problem).chosen
    packed = loose.solution.chosen
    assert _completion_rate(result.problem, packed) < _completion_rate(result.problem, exclusive)
    # With the host's whole run ahead of it, the same guests are packed under the guard.
    assert [type(d).__name__ for d in guarded.decide(_host_and_guests(3, age=600.0))] == [
        "Replan",
        "Start",
        "Start",
        "Start",
    ]


def test_no_guest_where_memory_does_not_fit() -> None:
    snapshot = _host_and_guests(3, age=600.0)
    tight = Cluster.uniform(4, 4, gpu_memory_bytes=2 * 2**30)
    decisions = _policy(eta_of=lambda model, plan: 1.0).decide(replace(snapshot, cluster=tight))
    assert not any("packed" in getattr(d, "reason", "") for d in decisions)


def test_guest_columns_off_never_pack() -> None:
    decisions = _policy(JigsawConfig(guests=False), eta_of=lambda m, p: 1.0).decide(
        _host_and_guests(3, age=600.0)
    )
    assert not any(isinstance(d, Replan) for d in decisions)
    assert not any("packed" in getattr(d, "reason", "") for d in decisions)


# -- no job starves ------------------------------------------------------------------------


def _stream(tmp_path: Path) -> Path:
    """A 4-GPU Philly-format trace: a 4-GPU job of two hours arrives behind two one-GPU jobs,
    then a one-GPU job of 20 minutes every 7 minutes for 30 hours: one-GPU jobs are always
    there to fill the GPUs, and under Pollux's objective a job left out costs the same
    whatever its size, so the 4-GPU job never pays for three of them."""
    start = datetime(2017, 10, 9)
    rows = ["timestamp,duration,num_gpus,gpu_time,cluster"]

    def row(at_s: float, duration_s: float, gpus: int) -> str:
        when = (start + timedelta(seconds=at_s)).strftime("%Y-%m-%d %H:%M:%S")
        return f"{when},{duration_s},{gpus},{duration_s * gpus},c"

    rows += [row(0.0, 1_200.0, 1), row(1.0, 1_200.0, 1), row(30.0, 7_200.0, 4)]
    at = 60.0
    while at < 30 * 3_600.0:
        rows.append(row(at, 1_200.0, 1))
        at += 420.0
    trace = tmp_path / "stream.csv"
    trace.write_text("\n".join(rows) + "\n")
    return trace


def _long_job_finish_h(trace: Path, config: JigsawConfig) -> float:
    setup = SimulationSetup(gpus=4, gpus_per_node=4, policy_options={"jigsaw": {"config": config}})
    oracle = make_oracle(setup)
    rates, arrivals = make_rates(load_jobs(trace, setup, oracle), setup, oracle)
    result = replay(arrivals, "jigsaw", rates, oracle, setup)
    assert result.summary["completed"] == len(arrivals)
    (big,) = [a for a in arrivals if a.spec.workers == 4]
    finished = result.store.get(big.job_id).finished_at
    assert finished is not None
    return finished / 3_600.0


def test_a_long_gang_finishes_under_a_steady_stream_of_short_jobs(tmp_path: Path) -> None:
    trace = _stream(tmp_path)
    guarded = _long_job_finish_h(trace, JigsawConfig(promote_s=3_600.0))
    unguarded = _long_job_finish_h(trace, JigsawConfig(promote_s=math.inf))
    assert guarded < 12.0  # it waits a few hours, then runs its two
    assert unguarded > 30.0  # without the guard it waits for the stream to end


# -- decisions pinned on three tiny clusters -------------------------------------------------


def test_pinned_a_lone_elastic_job_doubles_where_its_goodput_peaks() -> None:
    snapshot, source = _lone_elastic(10_000.0, resizes=0)
    assert _policy(goodput=source).decide(snapshot) == [
        Resize(
            "e",
            ((0, 0), (0, 1), (0, 2), (0, 3)),
            full_backprop(4, 4),
            68,
            "jigsaw: grew 2→4: goodput +25%, batch 272",
        )
    ]


def test_pinned_three_guests_in_a_staircase() -> None:
    staircase = replace(_full(4), depths=(0, 3, 3, 3))
    decisions = _policy().decide(_host_and_guests(3, age=600.0))
    assert decisions[0] == Replan(
        "host",
        staircase,
        ((0, 0), (0, 1), (0, 2), (0, 3)),
        "jigsaw: SPB depths (0, 3, 3, 3) on host: slack for g0, g1, g2, "
        "goodput of it and its guests +5%",
    )
    assert {(d.job_id, d.placement) for d in decisions[1:]} == {
        ("g0", ((0, 2),)),
        ("g1", ((0, 1),)),
        ("g2", ((0, 3),)),
    }
    assert all(isinstance(d, Start) and d.plan == full_backprop(1, 4) for d in decisions[1:])


def test_pinned_two_nodes_rigid_gangs_and_one_guest() -> None:
    """8 GPUs: a 4-GPU and a 2-GPU gang run; a 2-GPU gang takes the free pair, and the
    one-GPU job and the 4-GPU newcomer wait. A guest on the 4-GPU gang's staircase would
    lower the objective (a job fewer waiting), but the staircase costs that gang about a
    third of its goodput, four GPUs' worth, more than one guest gains: the cluster would do
    less, so no pack (solve.py's goodput row)."""
    cluster = Cluster.uniform(8, 4)
    a = running_job(
        JobSpec("a", "resnet18_32", 4, 10**6), ((0, 0), (0, 1), (0, 2), (0, 3)), _r18(4), 10.0
    )
    b = running_job(JobSpec("b", "resnet18_32", 2, 10**6), ((1, 0), (1, 1)), _r18(2), 10.0)
    queue = [
        Job(name, JobSpec(name, "resnet18_32", workers, 10**6), submitted_at=at)
        for name, workers, at in (("c", 2, 100.0), ("d", 1, 200.0), ("e", 4, 300.0))
    ]
    snapshot = Snapshot.build(600.0, cluster, [a, b, *queue])
    policy = _policy()
    decisions = policy.decide(snapshot)
    assert [(type(d).__name__, d.job_id) for d in decisions] == [("Start", "c")]
    (start_c,) = decisions
    assert isinstance(start_c, Start) and start_c.placement == ((1, 2), (1, 3))
    # The pack was offered and is cheaper in the objective alone: only the goodput row
    # keeps it out.
    result = policy.solve_round(snapshot)
    assert result is not None
    guests = [c for c in result.problem.columns if c.kind == "guest"]
    assert guests
    exclusive = solve_exclusive(result.problem)
    best_guest = min(guests, key=lambda c: c.cost)
    assert best_guest.cost < result.problem.columns[exclusive.chosen[best_guest.job]].cost


def _r18(workers: int) -> Plan:
    return full_backprop(workers, ORACLE.num_blocks("resnet18_32"))


def test_a_host_whose_guests_are_gone_goes_back_to_full_backprop() -> None:
    staircase = replace(_full(4), depths=(0, 3, 3, 3))
    spec = JobSpec("host", "resnet50_32", 4, 10**6, batch_size=128)
    host = running_job(spec, ((0, 0), (0, 1), (0, 2), (0, 3)), staircase, 0.0)
    cluster = Cluster.uniform(4, 4, gpu_memory_bytes=ORACLE.hardware.memory_bytes)
    (replan,) = _policy().decide(Snapshot(NOW, cluster, (), (host,)))
    assert isinstance(replan, Replan) and replan.plan == _full(4)
    assert replan.placement == host.placement
    assert replan.reason.startswith("jigsaw: back to full backprop on host: goodput +")


def test_a_fresh_guest_on_a_full_cluster_leaves_the_round_feasible() -> None:
    """A guest within its protection holds no GPU of its own: kept from waiting, it would
    need one, and on a full cluster no answer fits (a full-Philly replay stopped on this).
    The round is built again without protecting guests, and the guest keeps its slot or
    waits; the host is untouched."""
    staircase = replace(_full(4), depths=(0, 3, 3, 3))
    spec = JobSpec("host", "resnet50_32", 4, 10**6, batch_size=128)
    host = running_job(spec, ((0, 0), (0, 1), (0, 2), (0, 3)), staircase, NOW - 120.0)
    guest_spec = JobSpec("g", "resnet18_32", 1, 10**5, batch_size=32)
    guest = running_job(guest_spec, ((0, 3),), full_backprop(1, 4), NOW - 60.0)
    cluster = Cluster.uniform(4, 4, gpu_memory_bytes=ORACLE.hardware.memory_bytes)
    policy = _policy()
    assert policy.config.min_run_s > 120.0  # both are protected
    snapshot = Snapshot(NOW, cluster, (), (host, guest))
    result = policy.solve_round(snapshot)
    assert result is not None
    chosen = {
        result.problem.views[i].job.id: result.problem.columns[c]
        for i, c in enumerate(result.solution.chosen)
    }
    assert chosen["host"].gpus == 4
    assert chosen["g"].kind in {"guest", "off"}
    assert not any(d.job_id == "host" and isinstance(d, Preempt) for d in policy.decide(snapshot))


# -- aging: a waiting gang grows dearer to leave out ---------------------------------------


def _gang_behind_small_jobs(waited_s: float) -> Snapshot:
    """Four one-GPU jobs, started on arrival, have run for two hours (unprotected) on a
    4-GPU node, and a 4-GPU gang has waited ``waited_s``."""
    now = 100_000.0
    started = now - 7_200.0
    small = tuple(
        replace(
            running_job(JobSpec(f"s{i}", "resnet18_32", 1, 10**6), ((0, i),), _r18(1), started),
            submitted_at=started,
        )
        for i in range(4)
    )
    gang = Job("gang", JobSpec("gang", "resnet18_32", 4, 10**6), submitted_at=now - waited_s)
    return Snapshot(now, Cluster.uniform(4, 4), (gang,), small)


HOURS = (1, 2, 4, 8, 16, 32, 64, 128)


def _cost(problem: Problem, job_id: str, gpus: int) -> float:
    """The round's price of ``job_id`` on ``gpus`` GPUs of its own (0: waiting)."""
    (index,) = [i for i, v in enumerate(problem.views) if v.job.id == job_id]
    columns = [problem.columns[c] for c in problem.by_job[index]]
    return next(column.cost for column in columns if column.gpus == gpus)


@pytest.mark.parametrize("wait_weight", [0.0, 1.0, 4.0])
def test_aging_evicts_for_a_waiting_gang_exactly_when_its_weight_pays(wait_weight: float) -> None:
    started_at: list[int] = []
    for hours in HOURS:
        snapshot = _gang_behind_small_jobs(hours * 3_600.0)
        # Aging alone: equal jobs' work-left weights and the longest job's pin (one small
        # job would keep running) are other rows.
        config = JigsawConfig(wait_weight=wait_weight, remaining_weight=0.0, protect_longest=False)
        policy = _policy(config)
        result = policy.solve_round(snapshot)
        assert result is not None
        problem = result.problem

        small = [f"s{i}" for i in range(4)]
        keep = sum(_cost(problem, job, 1) for job in small) + _cost(problem, "gang", 0)
        evict = sum(_cost(problem, job, 0) for job in small) + _cost(problem, "gang", 4)
        decisions = policy.decide(snapshot)
        if evict < keep:
            started_at.append(hours)
            assert {d.job_id for d in decisions if isinstance(d, Preempt)} == set(small)
            assert [d.job_id for d in decisions if isinstance(d, Start)] == ["gang"]
        else:
            assert decisions == []
    if wait_weight == 0.0:
        assert started_at == []  # without aging, four small jobs always outweigh one gang
    else:
        # It pays from some wait on, and from then on at every longer one; the larger the
        # weight, the sooner.
        assert started_at == [h for h in HOURS if h >= started_at[0]]
        assert started_at[0] == (2 if wait_weight == 4.0 else 8)
