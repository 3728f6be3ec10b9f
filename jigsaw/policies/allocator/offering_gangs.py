"""Which running gangs may offer co-tenancy slots this round, and whether any slot exists.

A slot is a GPU that holds one gang's worker only, where the gang's plan (the one it runs,
or an SPB staircase it may switch to in place) leaves idle time (:mod:`.gang_offers`).
:mod:`.cotenancy` builds host columns and slots from these gangs; where no gang hosts now it
asks first only whether some slot exists (:func:`slot_exists`), and builds them once the
guests' floor check lets guests be priced.
"""

from __future__ import annotations

from collections import Counter
from itertools import chain
from typing import NamedTuple

from jigsaw.model.cluster import GpuId
from jigsaw.model.lifecycle import JobState
from jigsaw.model.plan import SPBPlan
from jigsaw.policies.allocator.configurations import JobView, Problem
from jigsaw.policies.allocator.gang_offers import GangOfferMemo, GangOffers, PlanOffer


class OfferingGangs(NamedTuple):
    occupants: Counter[GpuId]
    """Per GPU, how many jobs other than guests hold it."""
    gangs: list[tuple[int, int, GangOffers]]
    """(job index, keep column, offers) of each running SPB gang kept at its size that has a
    goodput under full backprop."""
    hosts_now: bool
    """Some gang runs an SPB staircase (:func:`any_host_now`)."""


def offering_gangs(problem: Problem, offers: GangOfferMemo) -> OfferingGangs:
    """The round's :class:`OfferingGangs`; the memo forgets the gangs that stopped running."""
    views = problem.views
    holding = [view for view in views if view.current]
    occupants = Counter(
        chain.from_iterable(view.current for view in holding if view.guest_of is None)
    )
    offers.forget_unless([view.job for view in holding])
    hosts_now = False
    found: list[tuple[int, int, GangOffers]] = []
    running = JobState.RUNNING
    for index, view in enumerate(views):
        current = view.current
        if not current:
            continue
        job = view.job
        plan = job.plan
        if not isinstance(plan, SPBPlan):
            continue
        hosts_now = hosts_now or runs_staircase(view)
        if job.state is not running:
            continue
        keep = problem.keep_column(index)
        if keep is None:
            continue
        offered = offers.offers(job, plan, current)
        if offered is not None:
            found.append((index, keep, offered))
    return OfferingGangs(occupants, found, hosts_now)


def slot_exists(problem: Problem, gangs: OfferingGangs) -> bool | None:
    """Whether some gang offers a slot, under the plan it runs or a staircase (a pinned gang
    under its own plan only), where no gang hosts now; ``None`` where a staircase keeps more
    than full backprop's goodput (its host column may then cost less than the keep column,
    and must be priced with the round)."""
    occupants = gangs.occupants
    if any(offer.ratio > 1.0 for _, _, offers in gangs.gangs for offer in offers.staircases):
        return None
    for index, _, offers in gangs.gangs:
        plans: tuple[PlanOffer, ...] = (offers.current,)
        if not problem.views[index].pinned:
            plans += offers.staircases
        for offer in plans:
            if offer.timing is not None and any(
                occupants[gpu] == 1 for _, gpu, _ in offer.open_gpus
            ):
                return True
    return False


def any_host_now(problem: Problem) -> bool:
    """Some running gang runs an SPB staircase (a host now): its columns must be priced."""
    return any(map(runs_staircase, problem.views))


def runs_staircase(view: JobView) -> bool:
    """The job holds GPUs as a gang (not a guest) and runs an SPB staircase: a host now."""
    plan = view.job.plan
    return (
        bool(view.current)
        and view.guest_of is None
        and isinstance(plan, SPBPlan)
        and not plan.is_full_backprop
    )
