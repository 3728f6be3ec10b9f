"""The waiting jobs a jigsaw round prices, and what the ones it sets aside cost to leave waiting.

A fresh rigid job that waits whatever the round decides, behind as many earlier ones of its
class as the GPUs could run, gets no columns (:mod:`~jigsaw.policies.shared.backlog`); the
objective still counts its price, so leaving the backlog out changes no answer.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from jigsaw.goodput.source import JobGoodput
from jigsaw.model.domain import Job
from jigsaw.model.snapshot import Snapshot
from jigsaw.policies.allocator.guest_candidates import MAX_GUESTS
from jigsaw.policies.allocator.objective import Objective
from jigsaw.policies.shared.backlog import Backlog, split_backlog


def round_backlog(
    snapshot: Snapshot,
    objective: Objective,
    goodput_of: Callable[[Job], JobGoodput | None],
    keep: frozenset[str] = frozenset(),
) -> Backlog:
    """The waiting jobs this round prices: all of them, less the fresh rigid jobs that wait
    whatever it decides. None is set aside with the starvation pin on (every waiting job's
    wait is read), nor with the work-left weight and a charged launch (fresh jobs' discounts
    then differ by age and their weights by work left: no one order ranks a class)."""
    config = objective.config
    ranked = objective.work_left_s is not None
    if math.isfinite(config.promote_s) or (ranked and config.launch_s > 0):
        waiting = list(snapshot.waiting)
        return Backlog(waiting, [goodput_of(job) for job in waiting])
    guests = config.guests
    return split_backlog(
        snapshot.waiting,
        goodput_of,
        snapshot.cluster.num_gpus,
        # The objective's weight reads the priority; a critical job is never set aside.
        class_of=lambda job: (job.spec.priority, job.id in keep),
        # Co-tenancy ranks the waiting one-GPU jobs for its guest columns, by weight.
        quota_of=lambda size: MAX_GUESTS if guests and size == 1 else 0,
        # With the work-left weight, a class ranks by weight (its discounts are all 1).
        rank_of=objective.weight if ranked else None,
    )


def set_aside_cost(snapshot: Snapshot, backlog: Backlog, objective: Objective) -> float:
    """What the jobs the backlog set aside cost to leave waiting: each class's first job's
    price times its count (with the work-left weight, each job is listed on its own), or
    with aging (its weights differ by wait) every job's."""
    if not backlog.classes_aside:
        return 0.0
    if objective.config.wait_weight <= 0 or objective.work_left_s is not None:
        return math.fsum(
            count * objective.cost(job, 0.0, changed=False) for job, count in backlog.classes_aside
        )
    kept = {job.id for job in backlog.waiting}
    return math.fsum(
        objective.cost(job, 0.0, changed=False) for job in snapshot.waiting if job.id not in kept
    )
