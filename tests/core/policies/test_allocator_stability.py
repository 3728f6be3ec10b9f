"""A quiet jigsaw round promises to stay quiet only while no price can change its answer.

A waiting job that has run before gets cheaper as it ages (its restart discount rises
towards 1). :func:`~jigsaw.policies.allocator.stability.stable_until` solves the round once
more at that limit: a waiting job that could never displace the running gang leaves the round
stable; one that will displace it once old enough does not, and a replay that skipped its
rounds would start it late.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from jigsaw.model.cluster import Cluster
from jigsaw.model.domain import Job, JobSpec
from jigsaw.model.plan import full_backprop
from jigsaw.model.snapshot import Snapshot
from jigsaw.policies.jigsaw import JigsawConfig, JigsawPolicy
from jigsaw.simulator import SimulationSetup, make_oracle
from tests.core.support import planner_for, running_job

ORACLE = make_oracle(SimulationSetup())
NOW = 100_000.0
HOUR = 3_600.0


def _world(
    waiting_attained: float, waiting_age: float, restarts: int, priority: int = 0
) -> Snapshot:
    """An 8-GPU gang running for ten hours (past its protection, so evictable), and an
    8-GPU job waiting ``waiting_age`` seconds after ``restarts`` preemptions, with
    ``waiting_attained`` GPU-seconds of service and ``priority``. Both rigid: their
    speedups are equal, so the objective prefers whichever weighs more (less attained
    service, higher priority), discounted."""
    gang = running_job(
        JobSpec("runner", "resnet18_32", 8, 10**7, batch_size=64),
        tuple((node, gpu) for node in range(2) for gpu in range(4)),
        full_backprop(8, 4),
        NOW - 10 * HOUR,
    )
    waiting = Job(
        "waiter",
        JobSpec("waiter", "resnet18_32", 8, 10**7, batch_size=64, priority=priority),
        submitted_at=NOW - waiting_age,
        attempt=restarts + 1,
        preemptions=restarts,
        attained_gpu_seconds=waiting_attained,
    )
    return Snapshot(NOW, Cluster.uniform(8, 4), (waiting,), (gang,))


def _policy() -> JigsawPolicy:
    # The critical path off: its own hint (when a waiting job becomes critical) is
    # tests/core/policies/test_critical_path.py's; these worlds isolate the waiter's price.
    return JigsawPolicy(
        ORACLE, planner_for(ORACLE), config=JigsawConfig(guests=False, protect_longest=False)
    )


def test_a_waiter_that_can_never_win_leaves_the_round_stable() -> None:
    """More attained service than the gang had when it started: it weighs less, at any
    discount."""
    snapshot = _world(waiting_attained=1e7, waiting_age=HOUR, restarts=3)
    policy = _policy()
    assert policy.decide(snapshot) == []
    until = policy.stable_until(snapshot)
    assert until is not None and until > NOW


def test_a_waiter_that_wins_once_older_keeps_the_round_asked_every_time() -> None:
    """A higher priority weighs twice the gang; a young restarted job's discount is 0, so it
    loses now, and its price falls below the gang's as it ages."""
    snapshot = _world(waiting_attained=0.0, waiting_age=60.0, restarts=3, priority=1)
    policy = _policy()
    assert policy.decide(snapshot) == []
    assert policy.stable_until(snapshot) is None
    later = _policy().decide(replace(snapshot, now=NOW + HOUR))
    assert [type(d).__name__ for d in later] == ["Preempt", "Start"]


@pytest.mark.parametrize("age", [600.0, 3_600.0, 36_000.0])
def test_the_limit_price_answer_is_the_answer_at_every_later_age(age: float) -> None:
    """Where the round is declared stable, the same world asked later, the waiter older,
    decides nothing either."""
    base = _world(waiting_attained=1e7, waiting_age=HOUR, restarts=3)
    assert _policy().stable_until(base) == math.inf
    later = replace(base, now=NOW + age)
    assert _policy().decide(later) == []


# -- aging: waiting weights grow without a limit ----------------------------------------------


def _aging_world(waited_h: float) -> Snapshot:
    """Four one-GPU jobs that have run two hours (evictable), and a 4-GPU gang that has
    waited ``waited_h`` hours: under aging it evicts them once it has waited long enough."""
    small = tuple(
        replace(
            running_job(
                JobSpec(f"s{i}", "resnet18_32", 1, 10**7),
                ((0, i),),
                full_backprop(1, 4),
                NOW - 2 * HOUR,
            ),
            submitted_at=NOW - 2 * HOUR,
        )
        for i in range(4)
    )
    gang = Job("gang", JobSpec("gang", "resnet18_32", 4, 10**7), submitted_at=NOW - waited_h * HOUR)
    return Snapshot(NOW, Cluster.uniform(4, 4), (gang,), small)


def _at(snapshot: Snapshot, later_s: float) -> Snapshot:
    """The same world ``later_s`` on: the gang waited that much longer, the jobs ran on."""
    return replace(snapshot, now=snapshot.now + later_s)


@pytest.mark.parametrize("waited_h", [0.5, 2.0, 4.0, 5.0, 5.5])
def test_under_aging_a_quiet_round_promises_only_what_holds(waited_h: float) -> None:
    """The hint names a moment no later than the first round that evicts for the gang, and
    while the gang is far from winning it names one at all (the replay skips rounds)."""
    config = JigsawConfig(guests=False, wait_weight=1.0)
    policy = JigsawPolicy(ORACLE, planner_for(ORACLE), config=config)
    snapshot = _aging_world(waited_h)
    assert policy.decide(snapshot) == []
    until = policy.stable_until(snapshot)
    first_eviction = next(
        minute * 60.0
        for minute in range(1, 24 * 60)
        if JigsawPolicy(ORACLE, planner_for(ORACLE), config=config).decide(
            _at(snapshot, minute * 60.0)
        )
    )
    if until is not None:
        assert until <= NOW + first_eviction
    if waited_h <= 4.0:  # four hours or more from winning: some rounds are skipped
        assert until is not None and until >= NOW + HOUR
