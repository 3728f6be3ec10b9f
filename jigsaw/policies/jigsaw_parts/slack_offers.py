"""The slots a slack market offers: which running gangs may host a guest, under which plan,
and on which of their GPUs (:mod:`jigsaw.policies.jigsaw_parts.slack` weighs and books them).

An SPB host offers up to ``plans_per_host`` of its SPB plans that keep at least
``host_keep`` of its best goodput, each with the GPUs of its partial ranks, least loaded
first; with ``share_full_backprop`` every running gang instead offers its GPUs under the plan
it runs. Offers are ordered by the load of their first GPU, then by the host's order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from jigsaw.model.cluster import GpuId
from jigsaw.model.domain import Job
from jigsaw.model.plan import Plan, SPBPlan
from jigsaw.policies.shared.plans import PlanCatalog, PlanOption


@dataclass(frozen=True, slots=True)
class Offer:
    """A host under one SPB plan and the GPUs of its partial ranks, least loaded first."""

    host: Job
    option: PlanOption
    gpus: tuple[GpuId, ...]


def find_offers(
    running: Iterable[Job],
    plans: Mapping[str, Plan],
    catalog: PlanCatalog,
    *,
    gone: set[str],
    host_keep: float,
    plans_per_host: int,
    share_full_backprop: bool,
) -> list[Offer]:
    """Every offer the ``running`` gangs (with their current ``plans``) make this round,
    best first; hosts in ``gone`` (preempted this round) offer nothing."""
    offers: list[tuple[float, int, Offer]] = []
    for order, host in enumerate(running):
        if share_full_backprop:
            offer = _current_plan_offer(host, plans, catalog, gone)
            if offer is not None:
                offers.append((min(offer.option.loads), order, offer))
            continue
        if not _can_host(host, plans, catalog, gone):
            continue
        current = plans[host.id]
        options = catalog.options(host)
        best = options[0].goodput
        offered = 0
        for option in options:
            if offered >= plans_per_host:
                break
            if option.is_full_backprop or option.goodput < host_keep * best:
                continue
            if not isinstance(option.plan, SPBPlan):
                continue  # only SPB frees slack
            on_spb = isinstance(current, SPBPlan) and not current.is_full_backprop
            if current != option.plan and on_spb:
                continue  # a host already on SPB offers its own plan's slack only
            ranks = sorted(
                (r for r in range(len(option.loads)) if option.plan.depths[r] > 0),
                key=lambda r: (option.loads[r], r),
            )
            if not ranks:
                continue
            offered += 1
            gpus = tuple(host.placement[r] for r in ranks)
            offers.append((option.loads[ranks[0]], order, Offer(host, option, gpus)))
    offers.sort(key=_offer_key)
    return [offer for _, _, offer in offers]


def _current_plan_offer(
    host: Job, plans: Mapping[str, Plan], catalog: PlanCatalog, gone: set[str]
) -> Offer | None:
    """``host``'s GPUs under the plan it runs, least-loaded worker first; None when it
    cannot host (preempted this round, two workers on one GPU, no profile)."""
    plan = plans.get(host.id)
    if plan is None or host.id in gone or len(set(host.placement)) != host.spec.workers:
        return None
    option = next((o for o in catalog.options(host) if o.plan == plan), None)
    if option is None or option.goodput <= 0.0:
        return None
    ranks = sorted(range(len(option.loads)), key=lambda r: (option.loads[r], r))
    return Offer(host, option, tuple(host.placement[r] for r in ranks))


def _can_host(host: Job, plans: Mapping[str, Plan], catalog: PlanCatalog, gone: set[str]) -> bool:
    spec = host.spec
    if spec.workers < 2 or not spec.plan_request.is_auto or host.id in gone:
        return False
    if len(set(host.placement)) != spec.workers or host.id not in plans:
        return False
    return catalog.default_option(host).goodput > 0.0


def _offer_key(item: tuple[float, int, Offer]) -> tuple[float, int]:
    return item[0], item[1]
