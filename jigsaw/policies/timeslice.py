"""``timeslice``: a Gandiva-style peer. Waiting one-GPU jobs share running jobs' GPUs.

Gandiva (Xiao et al., OSDI 2018) time-slices GPUs between jobs. This policy does the same
on jigsaw's mechanism, with SPB taken out, so a table can show what SPB adds over plain
time-slicing:

- every job runs full backprop (its catalog has no SPB plans), and nobody ever switches plan;
- elastic jobs keep their size (co-tenancy is the only lever), so a table row shows
  time-slicing alone;
- gangs are ranked (LAS or max-min), kept in a fair set, placed and preempted by the gang
  round below (jigsaw's before it became the joint allocator): the fair set is the ranked
  jobs whose gangs fit; waiting jobs are placed in rank order on free GPUs, else packed
  beside other gangs' workers where load and memory fit, else (fair jobs) on GPUs of
  preempted lower-ranked gangs; the best-ranked gang that does not fit reserves its GPUs so
  it cannot starve behind small jobs;
- a one-GPU job that finds no free GPU may take turns on a GPU that holds a single worker of
  a running gang of any size (:class:`~jigsaw.policies.jigsaw_parts.slack.SlackMarket` with
  ``share_full_backprop``). The turns are priced by the co-location model through the
  oracle's timings, and jigsaw's gain rule decides: the normalised goodput summed over the
  jobs concerned must not fall (rise by ``pack_gain``, 0 by default), the host keeps
  ``host_keep`` of its goodput, and (``completion_guard``) the affected jobs complete faster:
  the guest's remaining work is shorter than what the turns cost its hosts.

``pack_gain`` is 0 here, not jigsaw's 0.25: jigsaw's bar pays for a host giving up η and a
lease boundary to switch plan; a time-slice costs the host neither, and Gandiva shares a GPU
whenever a job waits. Under time-slicing that conserves GPU time, two workers that keep
their GPU busy all the time then share like a processor-sharing queue (each at half speed,
gain 0), and a worker that leaves its GPU idle part of each iteration (exposed
communication, a straggler's wait) gives its guest that idle time (gain > 0).

Options are :class:`TimesliceConfig`'s. This is a peer, not jigsaw: jigsaw decides sizes and
co-tenancy in one allocator (:mod:`jigsaw.policies.jigsaw`, docs/SCHEDULER.md, "jigsaw"), and its
``hosts: false`` row prices the same lever (guests by time-slicing) by its objective.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from jigsaw.model.decisions import Decision, Start
from jigsaw.model.domain import Job
from jigsaw.model.plan import Plan
from jigsaw.model.snapshot import Snapshot
from jigsaw.oracle import Oracle
from jigsaw.planning.planner import Planner
from jigsaw.policies.base import PolicyBase, register
from jigsaw.policies.jigsaw_parts.placing import Placer, Round
from jigsaw.policies.jigsaw_parts.slack import SlackMarket, SlackOptions
from jigsaw.policies.las import stable_ranking_until
from jigsaw.policies.shared.fairness import LasConfig, fair_shares, maxmin_order
from jigsaw.policies.shared.gang import DEFAULT_MIN_RUN_S, is_protected
from jigsaw.policies.shared.packing import GpuLedger
from jigsaw.policies.shared.plans import EtaOf, Footprint, PlanCatalog
from jigsaw.policies.speed.round_memory import RoundMemory

BASES = ("las", "maxmin")


@dataclass(frozen=True, slots=True)
class TimesliceConfig:
    load_threshold: float = 1.0
    """Most summed predicted load a shared GPU may carry (1.0: no time-slicing slow-down)."""
    packing: bool = True
    """Pack partial workers of different jobs onto shared GPUs (off: an ablation)."""
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
    base: str = "las"
    """The fairness guard's ranking: ``las`` (Tiresias) or ``maxmin`` (max-min deficit)."""
    pack_gain: float = 0.0
    """A guest shares a GPU when the normalised goodput summed over the jobs concerned rises
    by at least this much (1.0 = one job's exclusive goodput)."""
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
        if self.pack_gain < 0:
            raise ValueError("pack_gain must be >= 0")
        if not 0.0 <= self.host_keep <= 1.0:
            raise ValueError("host_keep must be in [0, 1]")
        if self.min_plan_hold_s < 0:
            raise ValueError("min_plan_hold_s must be >= 0")


class TimeslicePolicy(PolicyBase):
    name = "timeslice"
    periodic = True

    def __init__(
        self,
        oracle: Oracle,
        planner: Planner,
        *,
        config: TimesliceConfig | None = None,
        eta_of: EtaOf | None = None,
        incremental: bool = True,
    ) -> None:
        self.oracle = oracle
        self.config = config if config is not None else TimesliceConfig()
        self.planner = planner
        self.catalog = PlanCatalog(oracle, spb=False, eta_of=eta_of, planner=planner)
        self._slack = SlackOptions(
            pack_gain=self.config.pack_gain,
            host_keep=self.config.host_keep,
            min_plan_hold_s=self.config.min_plan_hold_s,
            completion_guard=self.config.completion_guard,
            share_full_backprop=True,
            policy_name=self.name,
        )
        self._placer = Placer(
            self.catalog,
            packing=self.config.packing,
            fair_ratio=self.config.fair_packing_ratio,
            backfill_ratio=self.config.backfill_packing_ratio,
            policy_name=self.name,
        )
        self.memory = RoundMemory(incremental=incremental)
        """What makes a round cheap without changing it
        (:mod:`~jigsaw.policies.speed.round_memory`)."""

    def decide(self, snapshot: Snapshot) -> list[Decision]:
        config = self.config
        now = snapshot.now
        if not snapshot.waiting:
            return []  # no SPB plans here: nothing to re-plan back
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
        self.memory.forget_gone(snapshot.running, self.catalog)
        return state.decisions + starts

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


def _plan_of(job: Job) -> Plan:
    """A running job's plan (the cycle records it on the job when it admits the job)."""
    assert job.plan is not None, f"running job {job.id} has no plan"
    return job.plan


register("timeslice", uses=frozenset({"oracle", "planner"}))(TimeslicePolicy)
