"""``protect_longest``: the running job that sets the makespan is kept exactly while no
packing of the rest could finish before it, and the pin's lapse by the clock is where the
arithmetic puts it."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from jigsaw.model.cluster import Cluster
from jigsaw.model.decisions import Preempt, Start
from jigsaw.model.domain import Job, JobSpec
from jigsaw.model.plan import Plan, full_backprop
from jigsaw.model.snapshot import Snapshot
from jigsaw.planning.catalog import ModelCatalog
from jigsaw.planning.planner import Planner
from jigsaw.policies.allocator.longest_job import longest_critical
from jigsaw.policies.allocator.remaining import remaining_seconds
from jigsaw.policies.jigsaw import JigsawConfig, JigsawPolicy
from jigsaw.policies.shared.plans import PlanCatalog
from jigsaw.simulator import SimulationSetup, make_oracle
from tests.core.support import running_job

ORACLE = make_oracle(SimulationSetup())
PLANNER = Planner(ORACLE.hardware, catalog=ModelCatalog(ORACLE.profiles))
NOW = 100_000.0
SMALL_ITERATIONS = 20_000


def _plan(workers: int) -> Plan:
    return full_backprop(workers, ORACLE.num_blocks("resnet18_32"))


def _round(gang_iterations: int) -> Snapshot:
    """Two 4-GPU nodes: a 4-GPU gang that has run two hours (unprotected) on node 0, four
    one-GPU jobs started a minute ago (protected) on node 1, and four fresh one-GPU jobs
    waiting. Four small jobs always outweigh one gang that has run: only a pin keeps it."""
    gang = running_job(
        JobSpec("gang", "resnet18_32", 4, gang_iterations),
        tuple((0, g) for g in range(4)),
        _plan(4),
        NOW - 7_200.0,
    )
    gang = replace(gang, submitted_at=NOW - 7_200.0)
    started = tuple(
        replace(
            running_job(
                JobSpec(f"r{i}", "resnet18_32", 1, SMALL_ITERATIONS), ((1, i),), _plan(1), NOW - 60
            ),
            submitted_at=NOW - 60,
        )
        for i in range(4)
    )
    waiting = tuple(
        Job(f"w{i}", JobSpec(f"w{i}", "resnet18_32", 1, SMALL_ITERATIONS), submitted_at=NOW - 30)
        for i in range(4)
    )
    return Snapshot(NOW, Cluster.uniform(8, 4), waiting, (gang, *started))


def _critical(snapshot: Snapshot, catalog: PlanCatalog) -> bool:
    """The gang's seconds left reach the drain horizon (worked out here, not by the module)."""

    def left(job: Job, running: bool) -> float:
        return remaining_seconds(catalog, job, NOW, running=running)

    work = sum(j.spec.workers * left(j, True) for j in snapshot.running)
    work += sum(j.spec.workers * left(j, False) for j in snapshot.waiting)
    return left(snapshot.running[0], True) >= work / 8


GANG_LENGTHS = (20_000, 50_000, 100_000, 200_000, 400_000, 10**6)


@pytest.mark.parametrize("protect", [False, True])
def test_the_longest_job_is_kept_exactly_while_it_is_critical(protect: bool) -> None:
    outcomes = []
    for iterations in GANG_LENGTHS:
        snapshot = _round(iterations)
        policy = JigsawPolicy(ORACLE, PLANNER, config=JigsawConfig(protect_longest=protect))
        decisions = policy.decide(snapshot)
        evicted = any(isinstance(d, Preempt) and d.job_id == "gang" for d in decisions)
        critical = _critical(snapshot, policy.catalog)
        outcomes.append(critical)
        assert evicted is not (protect and critical), iterations
        if evicted:  # its GPUs go to the waiting jobs
            assert {d.job_id for d in decisions if isinstance(d, Start)} == {"w0", "w1", "w2", "w3"}
    assert True in outcomes and False in outcomes  # both sides of the horizon were asked


def test_the_pin_lapses_where_idle_gpus_bring_the_horizon_down() -> None:
    """One 4-GPU job with 100 s left and one 2-GPU job with 10 s left on 8 GPUs: horizon
    (400 + 20) / 8 = 52.5 s; the gap of 47.5 s closes at 1 - 6/8 = 0.25 per second."""
    jobs = [Job("a", JobSpec("a", "mlp", 4, 1), 0.0), Job("b", JobSpec("b", "mlp", 2, 1), 0.0)]
    left = {"a": 100.0, "b": 10.0}
    found = longest_critical(jobs, [], 8, 50.0, lambda job, _running: left[job.id])
    assert found.job_id == "a"
    assert found.until == pytest.approx(50.0 + 47.5 / 0.25)
    # A full cluster: the horizon falls as fast as the job's own seconds.
    full = longest_critical(jobs, [], 6, 50.0, lambda job, _running: left[job.id])
    assert full.job_id == "a" and full.until == math.inf
    # Work waiting beyond it: nobody is critical.
    waiting = [Job("c", JobSpec("c", "mlp", 8, 1), 0.0)]
    left["c"] = 1_000.0
    assert longest_critical(jobs, waiting, 8, 50.0, lambda j, _r: left[j.id]).job_id is None


@pytest.mark.parametrize("protect", [False, True])
def test_a_quiet_round_ends_when_the_longest_jobs_pin_lapses(protect: bool) -> None:
    """A lone 4-GPU gang on 8 GPUs, past its minimum run: its horizon is half its own
    seconds left and falls at half its pace, so its pin lapses after ``left`` seconds, and
    the quiet-round hint ends there (without the pin nothing ends the quiet spell)."""
    gang = running_job(
        JobSpec("gang", "resnet18_32", 4, 10**6),
        tuple((0, g) for g in range(4)),
        _plan(4),
        NOW - 7_200.0,
    )
    snapshot = Snapshot(NOW, Cluster.uniform(8, 4), (), (gang,))
    policy = JigsawPolicy(ORACLE, PLANNER, config=JigsawConfig(protect_longest=protect))
    assert policy.decide(snapshot) == []
    left = remaining_seconds(policy.catalog, gang, NOW, running=True)
    quiet_until = policy.stable_until(snapshot)
    if protect:
        assert quiet_until == pytest.approx(NOW + left)
    else:
        assert quiet_until == math.inf
