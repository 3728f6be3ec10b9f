"""A co-tenancy round that decided nothing is quiet only while guests stay priced out.

:func:`~jigsaw.policies.allocator.guest_quiet.guests_stay_out` lets such a round's
``stable_until`` name a time: until then no round may decide anything unless a job arrives,
ends or changes. The worlds below are test_allocator_guest_bound's co-tenancy worlds, some
with their one-GPU waiting jobs preempted before (their restart discount, and with it their
guest and start prices, falls as they age). Each round found quiet is asked again, by a fresh
policy, at later moments before the spell ends and before any running job could finish: it
must decide nothing each time. The co-tenancy rounds found not quiet are asked the same way,
and some of them do decide something later (the check tells the cases apart).
"""

from __future__ import annotations

import dataclasses
import math
import random

from jigsaw.model.domain import Job, JobSpec
from jigsaw.model.plan import full_backprop
from jigsaw.model.snapshot import Snapshot
from jigsaw.policies.allocator.config import JigsawConfig
from jigsaw.policies.allocator.configurations import EXCLUSIVE, GUEST
from jigsaw.policies.allocator.guest_quiet import _at_limit
from jigsaw.policies.jigsaw import JigsawPolicy
from tests.core.policies.test_allocator_decisions import _policy
from tests.core.policies.test_allocator_guest_bound import NOW, ORACLE, _world
from tests.core.support import running_job

SEEDS = 200
RESTART_S = JigsawConfig().restart_s
LATER_S = (30.0, 600.0, 3_600.0, 6 * 3_600.0, 86_400.0, 7 * 86_400.0)
"""How long after the round it is asked again (within the spell and the first finish)."""


def _restarted(snapshot: Snapshot, seed: int) -> Snapshot:
    """The world with its one-GPU waiting jobs preempted once or twice before, their last
    restart just paid off (their discount a little above 0, rising towards 1 within hours:
    their prices fall, and a guest or a start that does not pay now may pay later)."""
    rng = random.Random(seed)
    waiting: list[Job] = []
    for job in snapshot.waiting:
        if job.spec.workers == 1:
            attempt = rng.choice([2, 3])
            paid_s = (attempt - 1) * RESTART_S + rng.uniform(5.0, 600.0)
            job = dataclasses.replace(
                job,
                attempt=attempt,
                submitted_at=NOW - paid_s,
                attained_gpu_seconds=rng.uniform(0.0, 2_000.0),
            )
        waiting.append(job)
    return Snapshot(snapshot.now, snapshot.cluster, tuple(waiting), snapshot.running)


def _full(snapshot: Snapshot) -> Snapshot:
    """The world with every free GPU taken by a one-GPU job started a minute ago (within its
    minimum run, so never evicted): a waiting one-GPU job may run only as a guest."""
    held = {gpu for job in snapshot.running for gpu in job.placement}
    fillers = tuple(
        running_job(
            JobSpec(f"f{index}", "resnet18_32", 1, 10**7, batch_size=32),
            (gpu,),
            full_backprop(1, ORACLE.num_blocks("resnet18_32")),
            NOW - 60.0,
        )
        for index, gpu in enumerate(g for g in snapshot.cluster.gpu_ids() if g not in held)
    )
    return Snapshot(snapshot.now, snapshot.cluster, snapshot.waiting, snapshot.running + fillers)


def _first_finish(policy: JigsawPolicy, snapshot: Snapshot) -> float:
    """When the first running job would finish at its requested size (an event)."""
    work = policy._work
    return min(
        (snapshot.now + work.seconds(job, snapshot.now, True) for job in snapshot.running),
        default=math.inf,
    )


def _decides_later(snapshot: Snapshot, until: float) -> bool:
    for later in LATER_S:
        at = snapshot.now + later
        if at >= until:
            break
        if _policy().decide(dataclasses.replace(snapshot, now=at)):
            return True
    return False


def test_a_quiet_cotenancy_round_decides_nothing_until_its_spell_ends() -> None:
    quiet = quiet_moving = loud = loud_later = 0
    for seed in range(SEEDS):
        plain = _world(seed)
        restarted = _restarted(plain, seed)
        for world in (plain, restarted, _full(plain), _full(restarted)):
            policy = _policy()
            if policy.decide(world):
                continue
            assert policy._last_round is not None
            result = policy._last_round[1]
            assert result is not None
            problem = result.problem
            if not problem.cotenancy_offered:
                continue
            until = policy.stable_until(world)
            horizon = _first_finish(policy, world)
            if until is None:
                loud += 1
                loud_later += _decides_later(world, horizon)
                continue
            quiet += 1
            assert problem.guest_limits is not None
            moving = any(job.attempt > 0 for job in world.waiting)
            quiet_moving += moving
            assert not _decides_later(world, min(until, horizon)), (seed, moving)
    assert quiet >= 10 and quiet_moving >= 3, (quiet, quiet_moving)
    assert loud >= 5 and loud_later >= 1, (loud, loud_later)


def test_the_limits_are_the_least_each_price_can_fall_to() -> None:
    """Each guest column a round priced has a limit twin (same guest, host column and slot)
    at its guest's term with discount 1: below it for a guest whose discount still rises,
    equal for one whose discount is 1. A restarted waiting job's starts fall likewise."""
    twins = falling = 0
    for seed in range(SEEDS):
        world = _full(_restarted(_world(seed), seed))
        policy = _policy()
        result = policy.solve_round(world)
        assert result is not None
        problem, objective = result.problem, result.objective
        limits = problem.guest_limits
        if limits is None:
            continue
        least = {(pair.job, pair.needs, pair.slot): pair for pair in limits}
        for column in problem.columns:
            if column.kind != GUEST:
                continue
            twin = least[(column.job, column.needs, column.slot)]
            job = problem.views[column.job].job
            weight = objective.weight(job)
            assert twin.speedup == column.speedup
            assert twin.cost == objective.term(weight, 1.0, column.speedup, changed=True)
            if objective.discount(job) < 1.0:
                assert twin.cost < column.cost
                falling += 1
            else:
                assert twin.cost == column.cost
            twins += 1
        every = range(len(problem.views))
        for index, (now, later) in enumerate(
            zip(problem.columns, _at_limit(problem, objective, every), strict=False)
        ):
            view = problem.views[now.job]
            moves = now.kind == EXCLUSIVE and now.gpus > 0 and not view.current
            if moves and objective.discount(view.job) < 1.0:
                assert later.cost < now.cost, index
            else:
                assert later.cost <= now.cost, index
    assert twins >= 50 and falling >= 10, (twins, falling)
