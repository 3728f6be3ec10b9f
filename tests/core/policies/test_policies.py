"""Policy invariants: gangs whole, GPUs never over-booked, LAS order, max-min shares, packing."""

from __future__ import annotations

from collections import defaultdict

import pytest

from jigsaw.model.cluster import Cluster
from jigsaw.model.decisions import Decision, Preempt, Replan, Start
from jigsaw.model.domain import Job, JobSpec, transition
from jigsaw.model.hardware import preset
from jigsaw.model.lifecycle import JobState
from jigsaw.model.plan import full_backprop
from jigsaw.model.snapshot import Snapshot
from jigsaw.oracle import Oracle
from jigsaw.policies import policy_names
from jigsaw.policies.builder import build_policy
from jigsaw.policies.shared.fairness import LasConfig, fair_shares, las_order, priority_weight
from jigsaw.policies.shared.packing import GpuLedger

ORACLE = Oracle(preset("v100"))


def waiting(job_id: str, workers: int, *, at: float = 0.0, priority: int = 0, **spec) -> Job:
    spec.setdefault("model", "resnet18_32")
    return Job(
        id=job_id,
        spec=JobSpec(name=job_id, workers=workers, iterations=1000, priority=priority, **spec),
        submitted_at=at,
    )


def running(job: Job, placement, *, since: float = 0.0, attained: float = 0.0) -> Job:
    admitted, _ = transition(
        job,
        JobState.ADMITTED,
        reason="t",
        at=since,
        actor="t",
        placement=tuple(placement),
        plan=full_backprop(job.spec.workers, 4),
    )
    moved, _ = transition(admitted, JobState.RUNNING, reason="t", at=since, actor="t")
    return Job(
        **{
            **{f: getattr(moved, f) for f in moved.__dataclass_fields__},
            "attained_gpu_seconds": attained,
        }
    )


def decide(policy_name: str, now: float, cluster: Cluster, jobs: list[Job], **options):
    policy = build_policy(policy_name, ORACLE, options)
    return policy.decide(Snapshot.build(now, cluster, jobs))


def gpus_after(jobs: list[Job], decisions: list[Decision]) -> dict[tuple[int, int], list[str]]:
    """Which jobs sit on each GPU once the decisions are applied."""
    placement = {job.id: job.placement for job in jobs if job.state.holds_resources}
    for decision in decisions:
        if isinstance(decision, Preempt):
            placement.pop(decision.job_id)
        elif isinstance(decision, Start | Replan):
            placement[decision.job_id] = decision.placement
    on: dict[tuple[int, int], list[str]] = defaultdict(list)
    for job_id, gpus in placement.items():
        for gpu in gpus:
            on[gpu].append(job_id)
    return on


def test_every_policy_is_registered() -> None:
    assert {"fifo", "las", "maxmin", "jigsaw", "pollux", "timeslice"} <= set(policy_names())


@pytest.mark.parametrize("name", ["fifo", "las", "maxmin", "jigsaw", "timeslice"])
def test_gangs_are_all_or_nothing_and_gpus_exclusive(name: str) -> None:
    cluster = Cluster.uniform(8, 4)
    jobs = [waiting(f"j{i}", workers, at=float(i)) for i, workers in enumerate([3, 4, 2, 5, 1])]
    decisions = decide(name, 10.0, cluster, jobs)
    by_id = {job.id: job for job in jobs}
    for decision in decisions:
        assert isinstance(decision, Start)
        assert len(decision.placement) == by_id[decision.job_id].spec.workers
        assert len(set(decision.placement)) == len(decision.placement)
    on = gpus_after(jobs, decisions)
    assert all(len(ids) == 1 for ids in on.values())  # resnet18_32 full workers never share
    assert set(on) <= set(cluster.gpu_ids())


def test_las_ranks_priority_then_attained_service_then_arrival() -> None:
    config = LasConfig(thresholds=(100.0,), promote_floor_s=1e9)
    old_heavy = running(waiting("heavy", 1, at=0.0), [(0, 0)], attained=500.0)
    young = waiting("young", 1, at=5.0)
    vip = waiting("vip", 1, at=9.0, priority=5)
    order = las_order([old_heavy, young, vip], now=10.0, config=config)
    assert [job.id for job in order] == ["vip", "young", "heavy"]


def test_las_preempts_lower_priority_and_names_the_preemptor() -> None:
    cluster = Cluster.uniform(2, 2)
    low = running(waiting("low", 2, at=0.0, priority=0), [(0, 0), (0, 1)], since=0.0)
    high = waiting("high", 2, at=500.0, priority=3)
    decisions = decide("las", 1000.0, cluster, [low, high], min_run_s=0.0)
    assert Preempt("low", "las: outranked", by="high") in decisions
    assert any(isinstance(d, Start) and d.job_id == "high" for d in decisions)


def test_las_lets_a_fresh_gang_pay_back_its_restart() -> None:
    cluster = Cluster.uniform(2, 2)
    low = running(waiting("low", 2, at=0.0), [(0, 0), (0, 1)], since=990.0)
    high = waiting("high", 2, at=500.0, priority=3)
    assert decide("las", 1000.0, cluster, [low, high], min_run_s=120.0) == []


def test_las_demotes_jobs_past_a_threshold_so_newcomers_run_first() -> None:
    cluster = Cluster.uniform(1, 1)
    config = LasConfig(thresholds=(100.0,), promote_floor_s=1e9)
    veteran = running(waiting("veteran", 1, at=0.0), [(0, 0)], since=0.0)
    newcomer = waiting("newcomer", 1, at=400.0)
    decisions = decide("las", 500.0, cluster, [veteran, newcomer], config=config, min_run_s=0)
    assert [type(d).__name__ for d in decisions] == ["Preempt", "Start"]


def test_las_promotes_a_starving_job() -> None:
    config = LasConfig(thresholds=(100.0,), promote_knob=2.0, promote_floor_s=50.0)
    starving = Job(
        id="old",
        spec=waiting("old", 1).spec,
        submitted_at=0.0,
        state=JobState.PREEMPTED,
        attained_gpu_seconds=200.0,
    )
    fresh = waiting("fresh", 1, at=990.0)
    assert las_order([fresh, starving], 1000.0, config)[0].id == "old"  # waited 800 > 2 x 200


def test_fair_shares_water_fill_with_priority_weights() -> None:
    jobs = [waiting("a", 4), waiting("b", 4, priority=1), waiting("c", 1)]
    shares = fair_shares(jobs, capacity=4)
    assert shares["c"] == pytest.approx(2 * shares["a"] / 2)  # same weight, same share
    assert shares["b"] == pytest.approx(2 * shares["a"])  # weight 2
    used = sum(shares[j.id] * j.spec.workers for j in jobs)
    assert used == pytest.approx(4.0)
    assert priority_weight(-1) == pytest.approx(0.5)


def test_maxmin_gives_the_gpus_to_the_job_furthest_behind_its_share() -> None:
    cluster = Cluster.uniform(2, 2)
    served = running(waiting("served", 2, at=0.0), [(0, 0), (0, 1)], since=0.0)
    starved = waiting("starved", 2, at=0.0)
    decisions = decide("maxmin", 1000.0, cluster, [served, starved], min_run_s=0.0)
    assert Preempt("served", "maxmin: outranked", by="starved") in decisions


def test_jigsaw_never_overbooks_memory() -> None:
    cluster = Cluster.uniform(4, 4, gpu_memory_bytes=5 * 2**30)  # a partial vgg16 worker: 2.6 GiB
    jobs = [
        waiting("first", 3, model="vgg16_224", spb="uniform:4"),
        waiting("second", 3, at=1.0, model="vgg16_224", spb="uniform:4"),
    ]
    decisions = decide("jigsaw", 10.0, cluster, jobs)
    assert [d.job_id for d in decisions] == ["first"]


def test_jigsaw_auto_plans_run_full_backprop_on_free_gpus() -> None:
    cluster = Cluster.uniform(8, 8)
    decisions = decide("jigsaw", 60.0, cluster, [waiting("a", 4, model="resnet50_224")])
    assert decisions == [
        Start(
            "a",
            tuple((0, g) for g in range(4)),
            full_backprop(4, ORACLE.num_blocks("resnet50_224")),
            "jigsaw: start on 4 GPUs",
        )
    ]


def test_jigsaw_schedules_models_it_has_no_profile_for() -> None:
    cluster = Cluster.uniform(2, 2)
    decisions = decide("jigsaw", 60.0, cluster, [waiting("x", 2, model="mypkg.train:main")])
    assert [d.job_id for d in decisions] == ["x"]


def test_ledgers_of_one_cluster_do_not_share_bookings() -> None:
    """Each round's ledger starts from a copied empty ledger: bookings never leak."""
    cluster = Cluster.uniform(8, 4)
    first = GpuLedger(cluster)
    first.add((0, 0), 0.6, 2**30)
    first.add((1, 3), 1.0, 2**30)
    second = GpuLedger(cluster)
    assert second.num_free == 8
    assert second.load[(0, 0)] == 0.0 and second.memory_used[(0, 0)] == 0
    assert (0, 0) in second.free_by_node[0] and (1, 3) in second.free_by_node[1]
    assert not second.partial
    assert first.num_free == 6 and (0, 0) in first.partial
    smaller = GpuLedger(cluster.without_node(1))
    assert smaller.num_free == 4 and 1 not in smaller.free_by_node


def test_jigsaw_does_not_let_a_gang_larger_than_the_cluster_block_the_queue() -> None:
    """A node was lost: the 8-worker gang can never start on the 4 GPUs left. It must not
    hold free GPUs for itself, or the small job behind it would wait forever."""
    from jigsaw.model.cluster import Node

    cluster = Cluster((Node(0, "a", 4), Node(1, "b", 4, alive=False)))
    jobs = [waiting("huge", 8, at=0.0), waiting("small", 2, at=1.0)]
    decisions = decide("jigsaw", 10.0, cluster, jobs)
    assert [d.job_id for d in decisions if isinstance(d, Start)] == ["small"]
