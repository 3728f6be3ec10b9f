"""las and timeslice keep their ranking (and timeslice its GPU ledger) across rounds; the decisions
must be the ones a policy rebuilding both every round takes.

1. Replays of a slice of the real Philly trace, decision log against decision log, with the
   kept state and with ``incremental=False`` (rebuilt every round).
2. Snapshots that do not follow from the last round by arrivals and finishes (a running
   gang cancelled, a waiting job's priority edited, a gang gone and back on other GPUs, a
   node lost): the kept policy must decide what a fresh one decides on the same snapshot.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from jigsaw.model.cluster import Cluster
from jigsaw.model.decisions import Decision, Preempt, Start
from jigsaw.model.domain import Job, JobSpec, transition
from jigsaw.model.hardware import preset
from jigsaw.model.lifecycle import JobState
from jigsaw.model.plan import full_backprop
from jigsaw.model.snapshot import Snapshot
from jigsaw.oracle import Oracle
from jigsaw.planning.catalog import ModelCatalog
from jigsaw.planning.planner import Planner
from jigsaw.policies.base import Policy
from jigsaw.policies.builder import build_policy
from jigsaw.policies.jigsaw_parts.placing import Round
from jigsaw.policies.las import LasPolicy
from jigsaw.policies.shared.fairness import LasConfig
from jigsaw.policies.timeslice import TimesliceConfig, TimeslicePolicy
from jigsaw.simulator import SimulationSetup, load_jobs, make_oracle, make_rates, replay

DATA = Path(__file__).resolve().parents[2] / "data"
ORACLE = Oracle(preset("v100"))
PLANNER = Planner(ORACLE.hardware, catalog=ModelCatalog(ORACLE.profiles))
TIGHT_LAS = LasConfig(thresholds=(600.0, 6_000.0), promote_knob=2.0, promote_floor_s=900.0)
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "las": ("las", {}),
    "las-tight": ("las", {"config": TIGHT_LAS, "min_run_s": 300.0}),
    "timeslice": ("timeslice", {}),
    "timeslice-tight": (
        "timeslice",
        {"config": TimesliceConfig(las=TIGHT_LAS, min_run_s=300.0)},
    ),
}


def _log(policy: str, options: dict[str, Any], gpus: int) -> tuple[list[str], dict[str, Any]]:
    setup = SimulationSetup(
        gpus=gpus, gpus_per_node=4, seed=3, keep_log=True, policy_options={policy: options}
    )
    oracle = make_oracle(setup)
    rates, arrivals = make_rates(
        load_jobs(DATA / "philly_excerpt.csv", setup, oracle), setup, oracle
    )
    result = replay(arrivals, policy, rates, oracle, setup)
    assert result.log.lines is not None
    return result.log.lines, result.summary


@pytest.mark.parametrize("gpus", [8, 16])
@pytest.mark.parametrize("name", sorted(CASES))
def test_kept_state_decides_as_rebuilding_every_round(name: str, gpus: int) -> None:
    policy, options = CASES[name]
    kept, kept_summary = _log(policy, options, gpus)
    rebuilt, rebuilt_summary = _log(policy, {**options, "incremental": False}, gpus)
    assert len(rebuilt) >= 40
    assert any(line.split()[1] == "preempt" for line in rebuilt) or gpus == 16
    assert kept == rebuilt
    assert kept_summary["decision_log_sha256"] == rebuilt_summary["decision_log_sha256"]
    assert kept_summary["cycles"] == rebuilt_summary["cycles"]


# -- snapshots that jump ----------------------------------------------------------------------
def _waiting(job_id: str, workers: int, at: float, *, priority: int = 0) -> Job:
    return Job(
        id=job_id,
        submitted_at=at,
        spec=JobSpec(
            name=job_id, model="resnet18_32", workers=workers, iterations=1_000, priority=priority
        ),
    )


def _running(job: Job, gpus: list[tuple[int, int]], since: float) -> Job:
    admitted, _ = transition(
        job,
        JobState.ADMITTED,
        reason="t",
        at=since,
        actor="t",
        placement=tuple(gpus),
        plan=full_backprop(len(gpus), 4),
    )
    return transition(admitted, JobState.RUNNING, reason="t", at=since, actor="t")[0]


def _policies(name: str) -> tuple[Policy, Policy]:
    if name == "timeslice":
        return TimeslicePolicy(ORACLE, PLANNER), TimeslicePolicy(ORACLE, PLANNER, incremental=False)
    return LasPolicy(PLANNER), LasPolicy(PLANNER, incremental=False)


def _both(kept: Policy, name: str, snapshot: Snapshot) -> list[Decision]:
    """The kept policy's decisions, checked against a fresh policy's on the same snapshot."""
    decisions = kept.decide(snapshot)
    fresh = build_policy(name, ORACLE)
    assert decisions == fresh.decide(snapshot)
    return decisions


@pytest.mark.parametrize("name", ["las", "timeslice"])
def test_a_cancelled_gang_and_an_edited_priority_are_seen(name: str) -> None:
    cluster = Cluster.uniform(8, 4)
    hog = _running(
        _waiting("hog", 8, 0.0), [(0, g) for g in range(4)] + [(1, g) for g in range(4)], 0.0
    )
    first, second = _waiting("first", 4, 10.0), _waiting("second", 4, 20.0)
    kept, _ = _policies(name)
    # Round 1: the hog is protected (fresh gang), nobody starts.
    assert _both(kept, name, Snapshot.build(100.0, cluster, [hog, first, second])) == []
    # Between rounds the hog is cancelled (no finish event reaches the policy) and
    # ``second`` gets a higher priority: it must now start first, on the hog's GPUs.
    edited = replace(second, spec=replace(second.spec, priority=3), version=1)
    decisions = _both(kept, name, Snapshot.build(160.0, cluster, [first, edited]))
    starts = [d.job_id for d in decisions if isinstance(d, Start)]
    assert starts[0] == "second"
    assert set(starts) == {"first", "second"}


@pytest.mark.parametrize("name", ["las", "timeslice"])
def test_a_gang_back_on_other_gpus_and_a_lost_node(name: str) -> None:
    cluster = Cluster.uniform(8, 4)
    a = _running(_waiting("a", 4, 0.0), [(0, g) for g in range(4)], 0.0)
    b = _waiting("b", 4, 1.0)
    c = _waiting("c", 2, 2.0)
    kept, _ = _policies(name)
    assert {d.job_id for d in _both(kept, name, Snapshot.build(60.0, cluster, [a, b, c]))} == {"b"}
    # Outside the policy's sight: a was stopped and restarted on node 1, b is still waiting.
    moved = _running(_waiting("a", 4, 0.0), [(1, g) for g in range(4)], 100.0)
    decisions = _both(kept, name, Snapshot.build(120.0, cluster, [moved, b, c]))
    placed = {d.job_id: d.placement for d in decisions if isinstance(d, Start)}
    assert all(gpu[0] == 0 for gpu in placed["b"])  # node 1 is a's now
    # Node 0 is lost: a new cluster object; nothing may be placed on it.
    smaller = cluster.without_node(0)
    decisions = _both(kept, name, Snapshot.build(180.0, smaller, [moved, b, c]))
    assert not any(isinstance(d, Preempt) for d in decisions)
    assert all(gpu[0] != 0 for d in decisions if isinstance(d, Start) for gpu in d.placement)


def test_kept_ledger_books_only_what_changed() -> None:
    """The kept path is taken: a round with one change re-books one gang, not all."""
    cluster = Cluster.uniform(16, 4)
    gangs = [_running(_waiting(f"r{i}", 1, float(i)), [(i // 4, i % 4)], 0.0) for i in range(12)]
    queue = [_waiting("w", 8, 50.0)]
    policy = TimeslicePolicy(ORACLE, PLANNER)
    policy.decide(Snapshot.build(60.0, cluster, gangs + queue))
    booked = policy.memory.rebooked
    assert booked == 12
    policy.decide(Snapshot.build(120.0, cluster, gangs[1:] + queue))
    assert policy.memory.rebooked == booked + 1


def test_a_round_that_raises_leaves_no_half_kept_state() -> None:
    """The cycle fails a job that makes the policy raise and asks again without it
    (jigsaw.scheduling.poison); state fixed up halfway before the raise must not survive."""
    cluster = Cluster.uniform(8, 4)
    a = _running(_waiting("a", 4, 0.0), [(0, g) for g in range(4)], 0.0)
    d = _running(_waiting("d", 4, 0.5), [(1, g) for g in range(4)], 0.0)
    b = _waiting("b", 4, 1.0)
    policy = TimeslicePolicy(ORACLE, PLANNER)
    assert policy.decide(Snapshot.build(60.0, cluster, [a, d, b])) == []
    # d has finished (its GPUs are unbooked first), then a record without a plan raises.
    broken = replace(a, plan=None, version=a.version + 1)
    with pytest.raises(AssertionError):
        policy.decide(Snapshot.build(120.0, cluster, [broken, b]))
    snapshot = Snapshot.build(180.0, cluster, [a, b])
    decisions = policy.decide(snapshot)
    assert decisions == TimeslicePolicy(ORACLE, PLANNER, incremental=False).decide(snapshot)
    assert [(x.job_id, x.placement[0][0]) for x in decisions if isinstance(x, Start)] == [("b", 1)]


def test_a_shape_that_found_no_place_is_tried_again_once_room_appears() -> None:
    """Within a round timeslice skips waiting jobs shaped like one that found no place, but
    only while the ledger, the reservation and the preemptions are unchanged."""
    cluster = Cluster.uniform(4, 4)
    holder = _running(_waiting("h", 4, 0.0), [(0, 0), (0, 1), (0, 2), (0, 3)], 0.0)
    first, second = _waiting("a", 2, 10.0), _waiting("b", 2, 11.0)
    policy = TimeslicePolicy(ORACLE, PLANNER, config=TimesliceConfig(packing=False))
    snapshot = Snapshot.build(60.0, cluster, [holder, first, second])
    ledger, footprints = policy._booked_ledger(snapshot)
    state = Round(snapshot, ledger, footprints, [], policy.memory.shape_skip(ledger))
    assert policy._place(first, False, state) is None  # every GPU is taken
    assert policy._place(second, False, state) is None  # same shape, same ledger
    ledger.remove_all(footprints["h"])  # the holder's GPUs come free
    start = policy._place(second, False, state)
    assert start is not None and len(start.placement) == 2
