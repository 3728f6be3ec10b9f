"""A starving job's reservation lets short jobs backfill and keeps long ones out.

With the starvation pin on, the longest-waiting starving job that does not fit reserves the
GPUs the protected gangs give back; until its *shadow time* (when enough of them will have
done so) a waiting job may start only if it is estimated to end by then (EASY backfilling),
so the reservation is never delayed and the GPUs are not left idle meanwhile.
"""

from __future__ import annotations

import math

from jigsaw.model.cluster import Cluster
from jigsaw.model.decisions import Start
from jigsaw.model.domain import Job, JobSpec
from jigsaw.model.plan import full_backprop
from jigsaw.model.snapshot import Snapshot
from jigsaw.policies.allocator.remaining import remaining_seconds
from jigsaw.policies.jigsaw import JigsawConfig, JigsawPolicy
from jigsaw.simulator import SimulationSetup, make_oracle
from tests.core.support import planner_for, running_job

ORACLE = make_oracle(SimulationSetup())
NOW = 200_000.0
CONFIG = JigsawConfig(guests=False, promote_s=3_600.0, remaining_weight=0.0)
"""No work-left weight: the short job would win the free GPU on its weight alone, and the
reservation would show nothing."""


def _policy() -> JigsawPolicy:
    return JigsawPolicy(ORACLE, planner_for(ORACLE), config=CONFIG)


def _iterations(policy: JigsawPolicy, workers: int, seconds: float) -> int:
    """Iterations that take ``seconds`` at ``workers`` GPUs under the job's best plan."""
    probe = Job("probe", JobSpec("probe", "resnet18_32", workers, 1, batch_size=64), 0.0)
    per_iteration = remaining_seconds(policy.catalog, probe, NOW, running=False)
    return max(round(seconds / per_iteration), 1)


def _world(policy: JigsawPolicy) -> Snapshot:
    """Four GPUs: a 2-GPU gang protected for 20 more minutes, a 1-GPU job protected for 25,
    one GPU free; a 4-GPU job starving (two hours waiting) and two 1-GPU jobs waiting, one
    of 10 minutes and one of 2 hours. The starving job's shadow time is 25 minutes away."""
    long_run = _iterations(policy, 2, 10 * 3_600.0)
    gang = running_job(
        JobSpec("gang", "resnet18_32", 2, long_run, batch_size=64),
        ((0, 0), (0, 1)),
        full_backprop(2, 4),
        NOW - 600.0,
    )
    single = running_job(
        JobSpec("single", "resnet18_32", 1, _iterations(policy, 1, 10 * 3_600.0), batch_size=64),
        ((0, 2),),
        full_backprop(1, 4),
        NOW - 300.0,
    )
    head = Job(
        "head",
        JobSpec("head", "resnet18_32", 4, _iterations(policy, 4, 3_600.0), batch_size=64),
        NOW - 7_200.0,
    )
    short = Job(
        "short",
        JobSpec("short", "resnet18_32", 1, _iterations(policy, 1, 600.0), batch_size=64),
        NOW - 60.0,
    )
    long = Job(
        "long",
        JobSpec("long", "resnet18_32", 1, _iterations(policy, 1, 7_200.0), batch_size=64),
        NOW - 120.0,
    )
    return Snapshot(NOW, Cluster.uniform(4, 4), (head, long, short), (gang, single))


def test_a_short_job_backfills_the_reservation_and_a_long_one_waits() -> None:
    policy = _policy()
    decisions = policy.decide(_world(policy))
    assert [(type(d), d.job_id) for d in decisions] == [(Start, "short")]


def test_without_the_pin_the_long_job_takes_the_free_gpu_too() -> None:
    """The control: with no reservation both one-GPU jobs compete for the free GPU on price
    alone (the older, equally weighted one wins), so the test above is the reservation's."""
    config = JigsawConfig(guests=False, promote_s=math.inf, remaining_weight=0.0)
    policy = JigsawPolicy(ORACLE, planner_for(ORACLE), config=config)
    decisions = policy.decide(_world(policy))
    assert [(type(d), d.job_id) for d in decisions] == [(Start, "long")]
