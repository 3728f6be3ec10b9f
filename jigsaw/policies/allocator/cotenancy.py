"""Co-tenancy columns: guests on a running gang's GPUs, and SPB hosts that make room for them.

A *slot* is one GPU of a running gang (the host) that holds only the host's worker. Every
gang kept at its size offers its slots under the plan it runs (time-slicing a full-backprop
worker: its idle share of the GPU goes to the guest). With ``hosts`` on, a gang whose SPB
request is ``auto`` also gets *host columns*: the same GPUs under one of its two best SPB
plans (one or two stop depths), switched in place, whose partial ranks leave more of their
GPU. A host column costs the host its goodput ratio (eta x the new iteration speed) in the
objective, and is offered only while it keeps ``host_keep`` of it.

A *guest column* puts a one-GPU job (waiting, or a guest now) on one slot. Its cost is the
guest's own term at the share of its solo speed the co-location model gives it there
(:mod:`jigsaw.oracle.colocation`, the model every simulator charges); the column also carries
what the host loses to the guest's turns, in speedup and in the host's term, which the
program charges once per host at the worst of its guests' losses. A guest is offered only
where its term plus that loss costs less than waiting. The guest needs the host's column
chosen and each slot takes one guest (:mod:`.solve`). Memory is a hard limit: the host's
worker there plus the guest fit the GPU.

The round stays small: at most ``MAX_SLOTS`` slots (those with the most idle compute), at
most ``MAX_GUESTS`` guests (the guests running now, then the heaviest-weighted, then the
oldest), and each guest on its ``guest_slots_per_job`` cheapest slots: forty waiting
one-GPU jobs on two or three hosts' slots once ran a program past the old 0.5 s clock limit,
and a program stopped by the clock makes decisions depend on the machine's load. HiGHS is
bounded by a node count (``JigsawConfig.solver_nodes``), the clock only a safety net.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from typing import NamedTuple

from jigsaw.model.cluster import Cluster, GpuId
from jigsaw.model.domain import Job
from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.plan import Plan
from jigsaw.oracle import GangTiming, Oracle
from jigsaw.planning.planner import Planner
from jigsaw.policies.allocator.config import JigsawConfig
from jigsaw.policies.allocator.configurations import (
    EXCLUSIVE,
    GUEST,
    HOST,
    OFF,
    Column,
    Problem,
)
from jigsaw.policies.allocator.gang_offers import ANY_GPU, GangOfferMemo, GangOffers, PlanOffer
from jigsaw.policies.allocator.guest_candidates import guest_candidates
from jigsaw.policies.allocator.objective import Objective
from jigsaw.policies.allocator.offering_gangs import (
    OfferingGangs,
    any_host_now,
    offering_gangs,
    slot_exists,
)
from jigsaw.policies.allocator.remaining import CompletionPaces, WorkLeft
from jigsaw.policies.shared.plans import PlanCatalog

MAX_SLOTS = 64
SHARES_KEPT = 100_000
"""Shares kept across rounds at most (then forgotten at once: a pure function's memo)."""


class _Slot(NamedTuple):
    """Immutable; a tuple, since a round builds up to ``MAX_SLOTS`` of them."""

    column: int
    """The host's column (exclusive keep-size, or a host column) that offers it."""
    gpu: GpuId
    free_memory: int
    idle: float
    host: int
    """The host's job index."""
    host_speedup: float
    host_changed: bool
    timing: GangTiming
    """The host's timing reduced to this GPU (:attr:`PlanOffer.alone_on`)."""


class Cotenancy:
    def __init__(
        self,
        catalog: PlanCatalog,
        oracle: Oracle,
        planner: Planner,
        objective: Objective,
        config: JigsawConfig,
        *,
        offers: GangOfferMemo | None = None,
        work: WorkLeft | None = None,
        shares: dict[tuple[object, ...], tuple[float, float] | None] | None = None,
    ) -> None:
        """``offers``: what running gangs offer, kept across rounds by the policy (default:
        a memo for this round only); ``work``: the jobs' seconds left, kept by the policy
        (default: one for this round only); ``shares``: a guest's and a host's shares of
        their speeds alone on a slot, per (guest model, batch, plan, host timing), oracle
        figures kept by the policy (default: for this round only)."""
        self.catalog = catalog
        self.oracle = oracle
        self.planner = planner
        self.objective = objective
        self.config = config
        self.offers = (
            offers
            if offers is not None
            else GangOfferMemo(catalog, hosts=config.hosts, host_keep=config.host_keep)
        )
        self.work = work if work is not None else WorkLeft(catalog)
        self.shares = shares if shares is not None else {}
        self._candidates: list[tuple[int, Plan, float]] = []
        self._offered: list[_Slot] = []
        self._deferred: tuple[Cluster, OfferingGangs] | None = None
        """The cluster and gangs whose host columns and slots :meth:`add_guests` builds."""

    def add_columns(self, problem: Problem, cluster: Cluster) -> None:
        """Host columns and slots (:meth:`offer_slots`), then every guest column."""
        if self.offer_slots(problem, cluster):
            self.add_guests(problem)

    def offer_slots(self, problem: Problem, cluster: Cluster) -> bool:
        """The first half of a round's co-tenancy: host columns, the slots they offer and the
        jobs' paces. Whether guests may be priced on them (:meth:`add_guests`): some job
        may be a guest and some slot is offered. Guest columns change no exclusive answer,
        so the exclusive optimum can be solved between the two halves.

        Where no gang hosts now, the host columns and the slot list wait for
        :meth:`add_guests` (most such rounds end at the guests' floor check): a host column
        then costs at least its gang's keep column (a staircase keeps at most the goodput of
        full backprop, and a change is discounted and churned), and the keep column is
        listed first, so it changes no exclusive answer. Only whether some slot exists is
        found now. A gang whose staircase would beat full backprop is priced now."""
        self._candidates = guest_candidates(problem, self.objective, self.planner)
        self._deferred = None
        if not self._candidates and not any_host_now(problem):
            return False  # nobody to pack and no host to price: no slot can matter this round
        gangs = offering_gangs(problem, self.offers)
        if not gangs.hosts_now:
            exists = slot_exists(problem, gangs)
            if exists is not None:
                if not exists:
                    return False
                problem.cotenancy_offered = True
                self._deferred = (cluster, gangs)
                return True
        return self._offer(problem, cluster, gangs)

    def _offer(self, problem: Problem, cluster: Cluster, gangs: OfferingGangs) -> bool:
        self._offered = self._slots(problem, cluster, gangs)
        if not self._offered:
            return False
        problem.cotenancy_offered = True
        if self.config.completion_guard:
            problem.pace = CompletionPaces(problem.views, self.work, self.objective.now)
        return bool(self._candidates)

    def guest_price_floors(self, problem: Problem) -> dict[int, float] | None:
        """Per guest candidate, a price no guest column of it can go below: its one-GPU
        exclusive column's. A guest runs on one GPU at no more than its speed alone (a
        share of its GPU's time, at most 1), starts as that column would, and the objective
        falls as speed rises. ``None`` when some candidate is a guest now: keeping its slot
        is no start, so its guest column may cost less."""
        floors: dict[int, float] = {}
        for job_index, _, _ in self._candidates:
            if problem.views[job_index].guest_of is not None:
                return None
            for column_index in problem.by_job[job_index]:
                column = problem.columns[column_index]
                if column.kind == EXCLUSIVE and column.gpus == 1:
                    floors[job_index] = column.cost
                    break
            else:
                return None
        return floors

    def add_guests(self, problem: Problem) -> None:
        """Every candidate's guest columns on the slots :meth:`offer_slots` found (first the
        host columns and slots it left)."""
        if self._deferred is not None:
            cluster, gangs = self._deferred
            self._deferred = None
            self._offer(problem, cluster, gangs)
        guests, slots = self._candidates, self._offered
        priced = self.shares
        if len(priced) > SHARES_KEPT:
            priced.clear()
        # Hosts of one shape share a timing: a guest's shares are read once per timing.
        timings: dict[GangTiming, int] = {}
        timing_of = [timings.setdefault(slot.timing, len(timings)) for slot in slots]
        distinct = list(timings)
        objective = self.objective
        terms: dict[int, tuple[float, float]] = {}
        for index in {slot.host for slot in slots} | {entry[0] for entry in guests}:
            job = problem.views[index].job
            terms[index] = (objective.weight(job), objective.discount(job))
        # A host's term alone on each slot, and its loss beside a guest leaving it
        # ``host_factor`` of its speed: each priced once a round (the same arithmetic).
        alone: dict[int, float] = {}
        losses: dict[tuple[int, float], float] = {}
        for job_index, plan, speedup in guests:
            view = problem.views[job_index]
            job = view.job
            off = min(
                (
                    problem.columns[i].cost
                    for i in problem.by_job[job_index]
                    if problem.columns[i].kind == OFF
                ),
                default=math.inf,  # starving: it must run somewhere
            )  # a guest column costing more than waiting is never chosen
            options: list[tuple[float, int, float, float, float, float]] = []
            memory = self._memory(job, plan)
            if memory is None:
                continue
            guest_key = (job.spec.model, job.spec.batch_size, plan)
            found: dict[int, tuple[float, float] | None] = {}
            costs: dict[tuple[int, bool], float] = {}
            weight, discount = terms[job_index]
            for position, (slot, timing) in enumerate(zip(slots, timing_of, strict=True)):
                if slot.host == job_index or memory > slot.free_memory:
                    continue
                if timing in found:
                    shares = found[timing]
                else:
                    key = (guest_key, distinct[timing])
                    if key not in priced:
                        priced[key] = self._shares(job, plan, slot)
                    shares = found[timing] = priced[key]
                if shares is None:
                    continue
                guest_share, host_factor = shares
                stays = view.guest_of is not None and view.current == (slot.gpu,)
                cost = costs.get((timing, stays))
                if cost is None:
                    cost = costs[(timing, stays)] = objective.term(
                        weight, discount, speedup * guest_share, changed=not stays
                    )
                loss = losses.get((position, host_factor))
                if loss is None:
                    host_terms, changed = terms[slot.host], slot.host_changed
                    by_itself = alone.get(position)
                    if by_itself is None:
                        by_itself = alone[position] = objective.term(
                            *host_terms, slot.host_speedup, changed=changed
                        )
                    beside = objective.term(
                        *host_terms, slot.host_speedup * host_factor, changed=changed
                    )
                    loss = losses[(position, host_factor)] = beside - by_itself
                total = cost + loss
                if total < off:
                    options.append((total, position, cost, guest_share, host_factor, loss))
            # Its cheapest slots, ties in slot order (a stable sort's first), built alone.
            for _, position, cost, share, factor, loss in heapq.nsmallest(
                self.config.guest_slots_per_job, options
            ):
                slot = slots[position]
                problem.add(
                    Column(
                        job_index,
                        GUEST,
                        0,
                        cost,
                        speedup * share,
                        plan=plan,
                        needs=slot.column,
                        slot=slot.gpu,
                        host_loss=slot.host_speedup * (1.0 - factor),
                        host_cost=loss,
                    )
                )

    # -- slots ------------------------------------------------------------------------------
    def _slots(self, problem: Problem, cluster: Cluster, gangs: OfferingGangs) -> list[_Slot]:
        occupants, offering = gangs.occupants, gangs.gangs
        # (-idle, column, gpu) first: the slots kept are the ``MAX_SLOTS`` with the most idle
        # compute, and only those are built.
        found: list[tuple[float, int, GpuId, int, int, float, bool, GangTiming]] = []
        columns = problem.columns
        for index, keep, offers in offering:
            keep_speedup = columns[keep].speedup
            if offers.full is None and not offers.staircases:  # keeps its plan: no host column
                plans: Sequence[tuple[int, PlanOffer, float, bool]] = (
                    (keep, offers.current, keep_speedup, False),
                )
            else:
                plans = self._host_columns(problem, index, keep, offers, keep_speedup)
            for column, offer, speedup, changed in plans:
                # No open GPU where the plan cannot be timed.
                found.extend(
                    (less_idle, column, gpu, used, index, speedup, changed, here)
                    for (less_idle, gpu, used), here in zip(
                        offer.open_gpus, offer.alone_on, strict=True
                    )
                    if occupants[gpu] == 1
                )
        # No two entries share (column, gpu): the tuples' order is their first three fields'.
        # A slot is priced on the host's timing on its GPU alone (:attr:`PlanOffer.alone_on`).
        return [
            _Slot(column, gpu, cluster.gpu_memory(gpu) - used, -idle, index, speedup, moved, here)
            for idle, column, gpu, used, index, speedup, moved, here in heapq.nsmallest(
                MAX_SLOTS, found
            )
        ]

    def _host_columns(
        self, problem: Problem, index: int, keep: int, offers: GangOffers, keep_speedup: float
    ) -> list[tuple[int, PlanOffer, float, bool]]:
        """(column, plan offer, speedup, changed) of every configuration of the job that
        keeps its GPUs: the keep-size column under the plan it runs, and host columns (from
        :mod:`.gang_offers`, priced now, the job's weight and discount read once)."""
        view = problem.views[index]
        job = view.job
        found: list[tuple[int, PlanOffer, float, bool]] = []
        current = offers.current
        if offers.full is None:
            found.append((keep, current, keep_speedup, False))
        else:
            # A host now: keeping its size keeps its SPB plan; back to full backprop in
            # place is a host column of its own.
            ratio = current.ratio
            column = problem.columns[keep]._replace(
                cost=self.objective.cost(job, keep_speedup * ratio, changed=False),
                speedup=keep_speedup * ratio,
                plan=current.plan,
            )
            problem.columns[keep] = column
            problem.flat = None
            found.append((keep, current, column.speedup, False))
        if view.pinned or (offers.full is None and not offers.staircases):
            return found  # no host column (most gangs: one GPU, or no SPB request of auto)
        terms = (self.objective.weight(job), self.objective.discount(job))
        if offers.full is not None:
            found.append(self._host(problem, index, offers.full, keep_speedup, terms))
        for offer in offers.staircases:
            speedup = keep_speedup * offer.ratio
            found.append(self._host(problem, index, offer, speedup, terms))
        return found

    def _host(
        self,
        problem: Problem,
        index: int,
        offer: PlanOffer,
        speedup: float,
        terms: tuple[float, float],
    ) -> tuple[int, PlanOffer, float, bool]:
        cost = self.objective.term(*terms, speedup, changed=True)
        gpus = len(problem.views[index].current)
        column = problem.add(Column(index, HOST, gpus, cost, speedup, plan=offer.plan))
        return column, offer, speedup, True

    def _memory(self, job: Job, plan: Plan) -> int | None:
        try:
            return self.oracle.worker_memory_bytes(job.spec.model, job.spec.batch_size, plan, 0)
        except InvalidSpecError:
            return None

    def _shares(self, guest: Job, plan: Plan, slot: _Slot) -> tuple[float, float] | None:
        """(guest's share of its solo speed, host's share of its own) on ``slot``."""
        alone = self.catalog.timing(guest, plan, (ANY_GPU,))
        if alone is None:
            return None
        host_id = "\0host"  # no job id starts with a NUL
        times = self.oracle.colocation.iteration_times({host_id: slot.timing, guest.id: alone})
        # Never above its speed alone: a share of the GPU's time (what bounds a guest's
        # price from below, :meth:`guest_price_floors`).
        return min(alone.alone_s / times[guest.id], 1.0), slot.timing.alone_s / times[host_id]
