"""Policies change nothing: the time a gang last changed plan lives on the job, set by the cycle
when it applies a re-plan or a start, and jigsaw's minimum hold reads it from there.

Poison bisection (jigsaw.scheduling.poison) asks the policy again about parts of a snapshot, and the
simulator may ask twice about one world: an answer must depend on the snapshot alone.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from jigsaw.model.cluster import Cluster
from jigsaw.model.decisions import Decision, Replan, Start
from jigsaw.model.domain import Job, JobSpec
from jigsaw.model.lifecycle import JobState
from jigsaw.model.plan import full_backprop
from jigsaw.model.snapshot import Snapshot
from jigsaw.oracle import Oracle
from jigsaw.planning.catalog import ModelCatalog
from jigsaw.planning.planner import Planner
from jigsaw.policies.base import PolicyBase
from jigsaw.policies.jigsaw import JigsawConfig, JigsawPolicy
from jigsaw.policies.timeslice import TimeslicePolicy
from jigsaw.simulator import SimulationSetup, make_oracle
from tests.core.support import planner_for, run_until_idle, running_job, setup, submit

NOW = 3_600.0


def _timeslice(oracle: Oracle, **options: Any) -> TimeslicePolicy:
    return TimeslicePolicy(oracle, planner=planner_for(oracle), **options)


def _host_and_guests(oracle: Oracle, *, plan_changed_at: float | None = None) -> Snapshot:
    """A 4-worker ``spb: auto`` gang, just started, filling a 4-GPU node, and three waiting
    one-worker jobs that fit only in the slack an SPB plan would open."""
    spec = JobSpec("host", "resnet50_224", 4, 10_000, batch_size=128)
    plan = full_backprop(4, oracle.num_blocks("resnet50_224"))
    gpus = ((0, 0), (0, 1), (0, 2), (0, 3))
    host = running_job(spec, gpus, plan, NOW)
    host = replace(host, plan_changed_at=plan_changed_at)
    guests = tuple(
        Job(f"g{i}", JobSpec(f"g{i}", "resnet18_32", 1, 200, batch_size=32), submitted_at=NOW - 9)
        for i in range(3)
    )
    cluster = Cluster.uniform(4, 4, gpu_memory_bytes=oracle.hardware.memory_bytes)
    return Snapshot(NOW, cluster, guests, (host,))


def _replans(decisions: list[Decision]) -> list[str]:
    return [d.job_id for d in decisions if isinstance(d, Replan)]


def test_asking_twice_about_one_snapshot_gives_the_same_answer() -> None:
    """The first answer re-plans the host for its guests; had deciding recorded that switch,
    the second answer would find the host on hold and pack nobody."""
    oracle = make_oracle(SimulationSetup())
    policy = JigsawPolicy(oracle, _planner(oracle))
    snapshot = _host_and_guests(oracle)
    first = policy.decide(snapshot)
    assert _replans(first) == ["host"]
    assert sum(isinstance(d, Start) for d in first) == 3
    assert policy.decide(snapshot) == first
    assert policy.stable_until(snapshot) is None


def test_timeslice_asked_twice_about_one_snapshot_gives_the_same_answer() -> None:
    """Its guests take turns on the full-backprop gang's GPUs; had deciding booked them for
    good, the second answer would find the GPUs shared and start nobody."""
    oracle = make_oracle(SimulationSetup())
    policy = _timeslice(oracle)
    snapshot = _host_and_guests(oracle)
    first = policy.decide(snapshot)
    assert _replans(first) == []
    assert sum(isinstance(d, Start) for d in first) == 3
    assert policy.decide(snapshot) == first
    assert policy.stable_until(snapshot) == _timeslice(oracle).stable_until(snapshot)


def test_the_minimum_hold_is_read_from_the_job() -> None:
    """jigsaw's hold counts from the run start the cycle recorded on the job: within it the
    host keeps its plan (and its guests wait); after it, the host switches for them."""
    oracle = make_oracle(SimulationSetup())
    config = JigsawConfig(min_hold_s=600.0)
    held = _host_and_guests(oracle)
    assert JigsawPolicy(oracle, _planner(oracle), config=config).decide(held) == []
    later = replace(held, now=NOW + 600.0)
    assert _replans(JigsawPolicy(oracle, _planner(oracle), config=config).decide(later)) == ["host"]


def _planner(oracle: Oracle) -> Planner:
    return Planner(oracle.hardware, catalog=ModelCatalog(oracle.profiles))


class _ReplanAt(PolicyBase):
    """Re-plans every running job once the clock reaches ``at``; starts nothing."""

    name = "replan-at"

    def __init__(self, at: float) -> None:
        self.at = at

    def decide(self, snapshot: Snapshot) -> list[Decision]:
        if snapshot.now < self.at:
            return []
        return [
            Replan(job.id, full_backprop(job.spec.workers, 1), job.placement, "test")
            for job in snapshot.running
            if job.plan_changed_at is None
        ]


def test_the_cycle_records_when_it_applied_a_re_plan() -> None:
    store, clock, executor, cycle = setup(num_gpus=2, per_node=2)
    submit(store, "a", 2, 1_000, at=0.0)
    cycle.run_once()  # fifo starts the gang
    clock.advance_to(5.0)
    cycle.run_once()
    assert store.get("a").state is JobState.RUNNING
    assert store.get("a").plan_changed_at is None
    cycle.policy = _ReplanAt(20.0)
    clock.advance_to(20.0)
    report = cycle.run_once()
    assert report.applied == 1
    assert store.get("a").plan_changed_at == 20.0
    run_until_idle(clock, executor, cycle)
    assert store.get("a").state is JobState.SUCCEEDED
    assert store.get("a").plan_changed_at == 20.0
