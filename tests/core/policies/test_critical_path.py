"""The critical path started: every job, running or waiting, whose work left reaches the
drain horizon is kept running or started, most left first, within a share of the GPUs; the
set's lapse by the clock is where the arithmetic puts it; and a round starts a critical
gang that shortest-remaining-work-first would leave waiting behind short jobs."""

from __future__ import annotations

import pytest

from jigsaw.model.cluster import Cluster
from jigsaw.model.decisions import Start
from jigsaw.model.domain import Job, JobSpec
from jigsaw.model.plan import full_backprop
from jigsaw.model.snapshot import Snapshot
from jigsaw.planning.catalog import ModelCatalog
from jigsaw.planning.planner import Planner
from jigsaw.policies.allocator.longest_job import WaitingWork, critical_path
from jigsaw.policies.jigsaw import JigsawConfig, JigsawPolicy
from jigsaw.simulator import SimulationSetup, make_oracle
from tests.core.support import running_job

ORACLE = make_oracle(SimulationSetup())
PLANNER = Planner(ORACLE.hardware, catalog=ModelCatalog(ORACLE.profiles))
NOW = 1_000.0


def _job(job_id: str, gpus: int) -> Job:
    return Job(job_id, JobSpec(job_id, "mlp", gpus, 1), 0.0)


# 16 GPUs. Running: a (4 GPUs, 100 s left), b (2, 10 s). Waiting: c (4, 90 s), d (8, 80 s),
# e (1, 5 s). Work 400 + 20 + 360 + 640 + 5 = 1,425 GPU-seconds: horizon 89.0625 s, so a
# and c are critical, d is not (80 s < 89.06 s).
LEFT = {"a": 100.0, "b": 10.0, "c": 90.0, "d": 80.0, "e": 5.0}
RUNNING = [_job("a", 4), _job("b", 2)]
WAITING = [_job("c", 4), _job("d", 8), _job("e", 1)]
HORIZON = 1_425.0 / 16


def _path(share: float, running: list[Job] = RUNNING, capacity: int = 16, hold: float = 0.0):
    return critical_path(running, WAITING, capacity, NOW, lambda j, _r: LEFT[j.id], share, hold)


def test_critical_jobs_are_kept_and_started_within_the_share() -> None:
    path = _path(0.5)  # 8 GPUs: a and c
    assert path.running == {"a"} and path.waiting == ("c",)
    # a's seconds fall below the horizon at 1 - 6/16 per second; d's reach it as the
    # horizon falls at 6/16 per second: a lapses first.
    lapse = (100.0 - HORIZON) / (1 - 6 / 16)
    onset = (HORIZON - 80.0) / (6 / 16)
    assert lapse < onset
    assert path.until == pytest.approx(NOW + lapse)


def test_a_critical_job_past_the_share_is_passed_over_and_the_order_watched() -> None:
    path = _path(0.25)  # 4 GPUs: a only; c is passed over
    assert path.running == {"a"} and path.waiting == ()
    # a's seconds pass c's 90 s in 10 s: from then c comes first.
    assert path.until == pytest.approx(NOW + 10.0)


def test_a_held_running_job_is_passed_later() -> None:
    """With ``hold`` 0.05, a (100 s) ranks at 105 s: c (90 s) passes it when a's seconds
    fall to 90 / 1.05, before a's lapse (17.5 s)."""
    path = _path(0.25, hold=0.05)
    assert path.running == {"a"} and path.waiting == ()
    assert path.until == pytest.approx(NOW + 100.0 - 90.0 / 1.05)


def test_between_near_equals_the_running_job_keeps_its_place() -> None:
    """16 GPUs, room for one 4-GPU job (share 0.25); horizon (380 + 388) / 16 = 48 s, so
    both are critical: x runs with 95 s left, y waits with 97 s. Without a hold y takes the
    place (x would be preempted at its minimum run's end); with 3% x keeps it."""
    left = {"x": 95.0, "y": 97.0}
    running, waiting = [_job("x", 4)], [_job("y", 4)]

    def path(hold: float):
        return critical_path(running, waiting, 16, NOW, lambda j, _r: left[j.id], 0.25, hold)

    assert path(0.0).running == frozenset() and path(0.0).waiting == ("y",)
    assert path(0.03).running == {"x"} and path(0.03).waiting == ()


def test_the_longest_critical_job_is_kept_whatever_the_share() -> None:
    path = _path(0.0625)  # 1 GPU: less than a's 4, but a is the critical path's head
    assert path.running == {"a"} and path.waiting == ()


def test_nobody_is_critical_under_a_deep_backlog() -> None:
    big = [_job("f", 16)]
    LEFT["f"] = 1_000.0
    try:
        path = critical_path(RUNNING, big, 16, NOW, lambda j, _r: LEFT[j.id], 0.5)
    finally:
        del LEFT["f"]
    # Horizon (400 + 20 + 16,000) / 16 = 1,026 s: f (1,000 s) and a (100 s) fall short.
    assert path.running == frozenset() and path.waiting == ()
    # f becomes critical when the horizon falls to its 1,000 s, at 6/16 per second.
    assert path.until == pytest.approx(NOW + (16_420 / 16 - 1_000.0) / (6 / 16))


def test_on_a_full_cluster_the_horizon_falls_a_second_per_second() -> None:
    # 6 GPUs, all busy: horizon 1,425 / 6 = 237.5 s, nobody critical; it falls at 6/6 per
    # second, so c (90 s, the waiting job with most left) becomes critical after 147.5 s.
    path = _path(1.0, capacity=6)
    assert path.running == frozenset() and path.waiting == ()
    assert path.until == pytest.approx(NOW + 1_425.0 / 6 - 90.0)


def _gang_round(critical_share: float) -> list[str]:
    """8 GPUs on 2 nodes, nothing running. Waiting: three 4-GPU gangs, two short and one
    that holds most of the work (the critical path), and nothing else. Shortest remaining
    work first runs the two short gangs; the critical path starts the long one."""
    waiting = tuple(
        Job(name, JobSpec(name, "resnet18_32", 4, iterations), submitted_at=NOW - 60)
        for name, iterations in (("short0", 2_000), ("short1", 2_000), ("long", 2_000_000))
    )
    snapshot = Snapshot(NOW, Cluster.uniform(8, 4), waiting, ())
    config = JigsawConfig(critical_share=critical_share)
    decisions = JigsawPolicy(ORACLE, PLANNER, config=config).decide(snapshot)
    return sorted(d.job_id for d in decisions if isinstance(d, Start))


def test_a_critical_gang_starts_before_short_ones() -> None:
    # Two 4-GPU gangs fill 8 GPUs: the class's quota is two, so without the critical path
    # the long gang, the lightest, is set aside and waits.
    assert _gang_round(0.0) == ["short0", "short1"]
    started = _gang_round(0.125)
    assert "long" in started and len(started) == 2


def test_a_critical_gang_that_does_not_fit_beside_protected_jobs_waits() -> None:
    """Eight one-GPU jobs started a minute ago (protected by their minimum run) fill 8 GPUs;
    a critical 4-GPU gang waits for them rather than making the round infeasible, and
    starts once their protection ends."""
    plan = full_backprop(1, ORACLE.num_blocks("resnet18_32"))
    running = tuple(
        running_job(JobSpec(f"r{i}", "resnet18_32", 1, 2_000), ((i // 4, i % 4),), plan, NOW - 60.0)
        for i in range(8)
    )
    gang = Job("long", JobSpec("long", "resnet18_32", 4, 2_000_000), submitted_at=NOW - 60)
    policy = JigsawPolicy(ORACLE, PLANNER, config=JigsawConfig())
    assert policy.decide(Snapshot(NOW, Cluster.uniform(8, 4), (gang,), running)) == []
    later = NOW + JigsawConfig().min_run_s
    decisions = policy.decide(Snapshot(later, Cluster.uniform(8, 4), (gang,), running))
    assert [d.job_id for d in decisions if isinstance(d, Start)] == ["long"]


def test_the_kept_waiting_side_gives_the_path_built_afresh() -> None:
    """The waiting side's work is kept while it is the very same jobs, and job by job when
    they change: through arrivals, starts and a job replaced by an equal copy, the path with
    the kept side is the one built afresh each round, the side is rebuilt exactly when the
    jobs changed, and then only new job objects are asked their seconds left."""
    kept = WaitingWork()
    left = {**LEFT, "f": 95.0, "g": 300.0}
    copy_of_d = _job("d", 8)
    rounds = [
        WAITING,
        list(WAITING),  # a new list of the very same jobs: kept
        [*WAITING, _job("f", 2)],  # an arrival
        [WAITING[0], copy_of_d, WAITING[2]],  # d replaced by a new object
        [WAITING[0], copy_of_d, WAITING[2]],
        [_job("g", 4)],  # a long job arrives alone: now it is critical
    ]
    rebuilt = []
    asked: list[list[str]] = []

    def counted(job: Job, running: bool) -> float:
        if not running:
            asked[-1].append(job.id)
        return left[job.id]

    for waiting in rounds:
        before = kept._jobs
        asked.append([])
        path = critical_path(RUNNING, waiting, 16, NOW, counted, 0.5, kept=kept)
        rebuilt.append(kept._jobs is not before)
        fresh = critical_path(RUNNING, waiting, 16, NOW, lambda j, _r: left[j.id], 0.5)
        assert path == fresh
    assert rebuilt == [True, False, True, True, False, True]
    # Only jobs it has not seen, as those very objects, are asked their seconds left.
    assert asked == [["c", "d", "e"], [], ["f"], ["d"], [], ["g"]]
    assert fresh.waiting == ("g",)
