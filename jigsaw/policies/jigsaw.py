"""JigSaw: choose an SPB plan and a placement for every job, packing partial workers together.

One round, read top to bottom (docs/SCHEDULER.md has the why):

1. rank every active job by the fairness guard, ``base``: LAS (priority, attained-service
   queue, arrival; starving jobs are promoted) or max-min deficit (Gavel-style);
2. the *fair set*: walking the ranking, jobs whose whole gang fits in the cluster's GPU count
   (fresh gangs younger than ``min_run_s`` first: they have not paid back their restart);
3. book every running gang's predicted load and memory in a :class:`GpuLedger`;
4. place waiting jobs in rank order (:mod:`jigsaw.policies.jigsaw_parts.placing`): on free GPUs
with their
   best exclusive plan; else packed with an SPB plan into other gangs' slack if its goodput
   is worth it; else, for a fair job only, preempt the lowest-ranked unprotected gangs
   outside the fair set until it fits; the
   best-ranked job that still does not fit reserves its GPU count: jobs ranked below it may
   only pack, so free GPUs accumulate for it (no starvation behind small jobs);
   a one-worker job that still waits may run in the slack a running ``spb: auto`` gang opens
   by switching to an SPB plan in place, when the cluster's normalised goodput rises by
   ``pack_gain`` (:mod:`jigsaw.policies.jigsaw_parts.slack`; the GPU is then time-sliced);
5. re-plan in place a running SPB gang whose GPUs now have room for a better plan (back to
   full backprop as soon as its guests are gone); no gang gives up goodput for slack twice
   within ``min_plan_hold_s``;
6. elastic jobs grow into GPUs nobody waits for and shrink to ``min_workers`` for waiting
   jobs, when the time it saves pays the resize's measured cost
   (:mod:`jigsaw.policies.jigsaw_parts.elastic_rule`, priced by
   :mod:`jigsaw.policies.jigsaw_parts.resize_pricing`).

Apart from the time-sliced slack of step 4, a GPU's summed load never exceeds
``load_threshold``; its memory is never over-booked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from jigsaw.model.decisions import Decision, Replan, Start
from jigsaw.model.domain import Job
from jigsaw.model.hardware import DEFAULT_GPU_TYPE, preset
from jigsaw.model.plan import Plan, SPBPlan
from jigsaw.model.snapshot import Snapshot
from jigsaw.oracle import Oracle
from jigsaw.planning.catalog import ModelCatalog
from jigsaw.planning.planner import Planner
from jigsaw.policies.base import PolicyBase, register
from jigsaw.policies.jigsaw_parts.elastic_rule import elastic_resizes
from jigsaw.policies.jigsaw_parts.placing import Placer, Round
from jigsaw.policies.jigsaw_parts.resize_cost import ResizeCostPrior, ResizeCosts
from jigsaw.policies.jigsaw_parts.resize_pricing import PricingTerms, ResizePricing
from jigsaw.policies.jigsaw_parts.slack import SlackMarket, SlackOptions
from jigsaw.policies.las import stable_ranking_until
from jigsaw.policies.shared.fairness import LasConfig, fair_shares, maxmin_order
from jigsaw.policies.shared.gang import DEFAULT_MIN_RUN_S, is_protected
from jigsaw.policies.shared.packing import GpuLedger
from jigsaw.policies.shared.plans import EtaOf, Footprint, PlanCatalog, PlanOption
from jigsaw.policies.speed.round_memory import RecordCache, RoundMemory

BASES = ("las", "maxmin")


@dataclass(frozen=True, slots=True)
class JigsawConfig:
    load_threshold: float = 1.0
    """Most summed predicted load a shared GPU may carry (1.0: no time-slicing slow-down)."""
    packing: bool = True
    """Pack partial workers of different jobs onto shared GPUs (off: an ablation)."""
    resize: bool = True
    """Grow and shrink elastic jobs by the simple rule
    (:mod:`~jigsaw.policies.jigsaw_parts.elastic_rule`;
    off: an ablation, elastic jobs keep their initial size)."""
    resize_priced: bool = True
    """The rule prices each resize (:mod:`~jigsaw.policies.jigsaw_parts.resize_pricing`; off: every
    resize
    is free, the unpriced rule, an ablation)."""
    resize_margin: float = 1.0
    """A resize must save ``1 + resize_margin`` times its cost."""
    resize_hold: float = 4.0
    """No resize of a job within this many times its cost after its last one."""
    resize_floor_s: float = 14.8
    """The resize-cost prior's gang start
    (:class:`~jigsaw.policies.jigsaw_parts.resize_cost.ResizeCostPrior`,
    fitted on local Ray; the simulator sets it to the restart it charges)."""
    resize_s_per_gb: float = 103.0
    """The prior's seconds per GB of checkpoint (weights and optimizer state)."""
    resize_control_iterations: int = 25
    """The prior's wait for the old gang's next control point, in iterations."""
    las: LasConfig = field(default_factory=LasConfig)
    min_run_s: float = DEFAULT_MIN_RUN_S
    """A gang is not preempted before it has run this long (it paid a restart to start)."""
    min_residual: float = 0.2
    """A GPU with less free load than this is not offered for packing."""
    fair_packing_ratio: float = 0.85
    """A fair-set job takes a packed SPB placement instead of preempting someone only when
    its goodput is at least this share of its exclusive goodput."""
    backfill_packing_ratio: float = 0.3
    """A job outside the fair set runs packed when that gives at least this share."""
    replan_gain: float = 0.05
    """An in-place re-plan must raise the job's goodput by this share (it costs a lease)."""
    base: str = "las"
    """The fairness guard's ranking: ``las`` (Tiresias) or ``maxmin`` (max-min deficit)."""
    pack_gain: float = 0.25
    """A one-worker job runs in a host's SPB slack when the normalised goodput summed over
    the jobs concerned rises by at least this much (1.0 = one job's exclusive goodput)."""
    host_keep: float = 0.35
    """A host gives slack only while it keeps at least this share of its goodput."""
    min_plan_hold_s: float = 600.0
    """A gang does not give up goodput for slack again within this long after a plan change
    (bounds re-plan churn: at most a switch to SPB and one back per hold)."""
    completion_guard: bool = True
    """Take a slot only if it also raises the affected jobs' completion rate,
    ``sum(speed / remaining exclusive seconds)``: a long guest does not slow a host that is
    near its end (off: an ablation)."""

    def __post_init__(self) -> None:
        if not 0.0 < self.load_threshold <= 4.0:
            raise ValueError("load_threshold must be in (0, 4]")
        if self.min_run_s < 0 or not 0.0 <= self.min_residual < self.load_threshold:
            raise ValueError("min_run_s must be >= 0 and min_residual in [0, load_threshold)")
        if self.base not in BASES:
            raise ValueError(f"base must be one of {', '.join(BASES)}, got {self.base!r}")
        if self.pack_gain < 0 or self.replan_gain < 0:
            raise ValueError("pack_gain and replan_gain must be >= 0")
        if not 0.0 <= self.host_keep <= 1.0:
            raise ValueError("host_keep must be in [0, 1]")
        if self.min_plan_hold_s < 0:
            raise ValueError("min_plan_hold_s must be >= 0")


class JigsawPolicy(PolicyBase):
    name = "jigsaw"
    periodic = True
    sizes_elastic_jobs = True

    def __init__(
        self,
        oracle: Oracle | None = None,
        *,
        config: JigsawConfig | None = None,
        eta_of: EtaOf | None = None,
        spb: bool = True,
        incremental: bool = True,
        planner: Planner | None = None,
    ) -> None:
        self.oracle = oracle if oracle is not None else Oracle(preset(DEFAULT_GPU_TYPE))
        self.config = config if config is not None else JigsawConfig()
        self.planner = (
            planner
            if planner is not None
            else Planner(self.oracle.hardware, catalog=ModelCatalog(self.oracle.profiles))
        )
        self.catalog = PlanCatalog(self.oracle, spb=spb, eta_of=eta_of, planner=self.planner)
        self._slack = SlackOptions(
            pack_gain=self.config.pack_gain,
            host_keep=self.config.host_keep,
            min_plan_hold_s=self.config.min_plan_hold_s,
            completion_guard=self.config.completion_guard,
            policy_name=self.name,
        )
        self._placer = Placer(
            self.catalog,
            packing=self.config.packing,
            fair_ratio=self.config.fair_packing_ratio,
            backfill_ratio=self.config.backfill_packing_ratio,
            policy_name=self.name,
        )
        if not self.config.resize:
            self.sizes_elastic_jobs = False
        self.pricing = _resize_pricing(self.oracle, self.config)
        self.memory = RoundMemory(incremental=incremental)
        """What makes a round cheap without changing it
        (:mod:`~jigsaw.policies.speed.round_memory`)."""
        self._better: RecordCache[tuple[PlanOption, ...]] = self.memory.record_cache()

    def decide(self, snapshot: Snapshot) -> list[Decision]:
        decisions = self._round(snapshot)
        if not self.sizes_elastic_jobs:
            return decisions
        return decisions + elastic_resizes(snapshot, decisions, self.pricing)

    def _round(self, snapshot: Snapshot) -> list[Decision]:
        config = self.config
        now = snapshot.now
        spb_running = [
            j
            for j in snapshot.running
            if isinstance(j.plan, SPBPlan) and not j.plan.is_full_backprop
        ]
        if not snapshot.waiting and not spb_running:
            return []
        ranked = self._rank(snapshot)
        holds = {job.id for job in snapshot.running}
        fair = self._fair_set(ranked, snapshot, holds)
        ledger, footprints = self._booked_ledger(snapshot)
        victims = [
            job
            for job in reversed(ranked)
            if job.id in holds
            and job.id not in fair
            and not is_protected(job, now, config.min_run_s)
        ]
        state = Round(snapshot, ledger, footprints, victims, self.memory.shape_skip(ledger))
        market: SlackMarket | None = None
        starts: list[Decision] = []
        for job in ranked:
            if job.id not in holds:
                if market is not None and job.id in market.taken:
                    continue
                is_fair = job.id in fair
                start = self._place(job, is_fair, state)
                if start is None and config.packing and job.spec.workers == 1:
                    if market is None:
                        queue = [j for j in ranked if j.id not in holds]
                        market = self._market(state, queue)
                    squeeze = market.place(job)
                    if squeeze is not None:
                        if squeeze.replan is not None:
                            starts.append(squeeze.replan)
                        starts.extend(squeeze.starts)
                        continue
                if start is not None:
                    starts.append(start)
                elif state.reserved == 0 and job.spec.workers <= snapshot.cluster.num_gpus:
                    # Free GPUs accumulate for the best-ranked waiting gang that did not fit:
                    # jobs ranked below it may only pack, so it cannot starve. A gang larger
                    # than the alive cluster can never start: it reserves nothing.
                    state.reserved = job.spec.workers
        replans = self._replan_in_place(spb_running, state)
        self.memory.forget_gone(snapshot.running, self.catalog)
        return state.decisions + starts + replans

    def stable_until(self, snapshot: Snapshot) -> float | None:
        """Placement, packing and re-plans depend on the ledger, not on time, except that a
        gang's plan hold ends; the ranking and the protection of fresh gangs are LAS's (see
        :meth:`Policy.stable_until`). A max-min ranking moves all the time: no promise."""
        if self.config.base != "las":
            return None
        now, hold = snapshot.now, self.config.min_plan_hold_s
        holds = [
            job.plan_changed_at + hold
            for job in snapshot.running
            if job.plan_changed_at is not None and job.plan_changed_at + hold > now
        ]
        until = stable_ranking_until(snapshot, self.memory, self.config.las, self.config.min_run_s)
        return min(until, min(holds)) if holds else until

    # -- 1. the fairness guard's ranking ----------------------------------------------------
    def _rank(self, snapshot: Snapshot) -> list[Job]:
        jobs = snapshot.running + snapshot.waiting
        if self.config.base == "maxmin":
            shares = fair_shares(jobs, snapshot.cluster.num_gpus)
            return maxmin_order(jobs, snapshot.now, shares)
        return self.memory.las_order(jobs, snapshot.now, self.config.las)

    # -- 2. the fair set --------------------------------------------------------------------
    def _fair_set(self, ranked: Sequence[Job], snapshot: Snapshot, holds: set[str]) -> set[str]:
        budget = snapshot.cluster.num_gpus
        fair: set[str] = set()
        now, min_run_s = snapshot.now, self.config.min_run_s
        for job in snapshot.running:
            started = job.run_started_at
            if started is None or now - started < min_run_s:  # still starting, or fresh
                fair.add(job.id)
                budget -= job.spec.workers
        reserved = 0
        for job in ranked:
            if budget <= 0:
                break  # every gang has a worker: no more fit
            if job.id in fair:
                continue
            waits = job.id not in holds
            if job.spec.workers <= budget - (reserved if waits else 0):
                fair.add(job.id)
                budget -= job.spec.workers
            elif waits and reserved == 0 and job.spec.workers <= snapshot.cluster.num_gpus:
                reserved = job.spec.workers  # as in gang_round: no backfill past it
        return fair

    # -- 3. the running gangs' bookings -----------------------------------------------------
    def _booked_ledger(self, snapshot: Snapshot) -> tuple[GpuLedger, dict[str, Footprint]]:
        catalog = self.catalog
        return self.memory.booked_ledger(
            snapshot.cluster,
            snapshot.running,
            lambda job: catalog.footprint(job, _plan_of(job), job.placement),
            threshold=self.config.load_threshold,
            min_residual=self.config.min_residual,
        )

    # -- 4. placing a waiting job -----------------------------------------------------------
    def _place(self, job: Job, is_fair: bool, state: Round) -> Start | None:
        """Jobs with equal plan options and fairness (``shape``) are placed alike, and one
        that found no place finds none while the ledger is unchanged: within a round the
        reservation only grows, and a preemption unbooks its victims."""
        shape = (*self.catalog.options_key(job), is_fair)
        return state.unplaced.place(shape, self._placer.place, job, is_fair, state)

    def _market(self, state: Round, queue: list[Job]) -> SlackMarket:
        return SlackMarket(
            self.catalog,
            self.oracle,
            self._slack,
            running=state.snapshot.running,
            queue=queue,
            ledger=state.ledger,
            footprints=state.footprints,
            gone=state.preempted,
            now=state.snapshot.now,
        )

    # -- 5. in-place re-plans ---------------------------------------------------------------
    def _better_plans(self, job: Job) -> tuple[PlanOption, ...]:
        """The plans worth re-planning ``job`` to in place, best first, if its GPUs have
        room: more than ``replan_gain`` above its current plan's goodput, compared on the
        gang's own GPUs (an option's goodput is the exclusive, compact one, and a gang
        placed across nodes would otherwise "improve" to the plan it already runs, every
        round). The answer depends on the job's record and the config alone."""
        return self._better.get(job, self.config, self._find_better_plans)

    def _find_better_plans(self, job: Job) -> tuple[PlanOption, ...]:
        plan = _plan_of(job)
        bar = self.catalog.goodput(job, plan, job.placement) * (1.0 + self.config.replan_gain)
        better: list[PlanOption] = []
        for option in self.catalog.options(job):
            if option.goodput <= bar:
                break  # options come best first (exclusive goodput >= on these GPUs)
            if option.plan != plan and self.catalog.goodput(job, option.plan, job.placement) > bar:
                better.append(option)
        return tuple(better)

    def _replan_in_place(self, spb_running: Sequence[Job], state: Round) -> list[Decision]:
        replans: list[Decision] = []
        for job in spb_running:
            if job.id in state.preempted or not job.spec.plan_request.is_auto:
                continue
            # No hold here: a re-plan in place only ever raises the gang's goodput (its guests
            # are gone, or left room), so it cannot flap; the hold bounds the switches that
            # give goodput up for slack (the market's), so re-plans per hold stay <= 2.
            better = self._better_plans(job)
            if not better:
                continue
            ledger = state.ledger
            booked = state.footprints[job.id]
            chosen: tuple[PlanOption, Footprint] | None = None
            for option in better:
                footprint = self.catalog.footprint(job, option.plan, job.placement)
                if ledger.fits_instead(booked, footprint):
                    chosen = (option, footprint)
                    break
            if chosen is None:
                continue
            ledger.remove_all(booked)
            ledger.add_all(chosen[1])
            state.footprints[job.id] = chosen[1]
            replans.append(
                Replan(
                    job.id,
                    chosen[0].plan,
                    job.placement,
                    f"jigsaw: re-plan to {chosen[0].label} in place",
                )
            )
        return replans


def _resize_pricing(oracle: Oracle, config: JigsawConfig) -> ResizePricing | None:
    if not config.resize_priced:
        return None
    prior = ResizeCostPrior(
        config.resize_floor_s, config.resize_s_per_gb, config.resize_control_iterations
    )
    terms = PricingTerms(config.resize_margin, config.resize_hold)
    return ResizePricing(oracle, ResizeCosts(oracle, prior), terms)


def _plan_of(job: Job) -> Plan:
    """A running job's plan (the cycle records it on the job when it admits the job)."""
    assert job.plan is not None, f"running job {job.id} has no plan"
    return job.plan


register("jigsaw", uses=frozenset({"oracle", "planner"}))(JigsawPolicy)
