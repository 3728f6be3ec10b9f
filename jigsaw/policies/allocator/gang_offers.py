"""What a running gang can offer co-tenancy on the GPUs it holds, kept from round to round.

A gang's configurations that keep its GPUs (the plan it runs, full backprop in place, its
best SPB staircases) have goodput ratios, timings and footprints that depend on the job's
plan options, the plan it runs and its GPUs, never on the round's clock. Co-tenancy
(:mod:`.cotenancy`) read them from the oracle for every running gang in every round; they
are now computed once per (job, plan, GPUs) and read by every later round, and only the
prices, which move with the clock, are made each round. The figures are the same floats,
so the columns and the decisions are the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from jigsaw.model.cluster import GpuId, Placement
from jigsaw.model.domain import Job
from jigsaw.model.plan import Plan, SPBPlan, full_backprop
from jigsaw.oracle import GangTiming
from jigsaw.policies.shared.plans import PlanCatalog

SPB_PLANS_PER_HOST = 2
"""A host column is offered for at most this many SPB plans of a gang (its best)."""
MIN_SLACK = 0.05
"""A GPU whose host worker leaves less than this share idle is not offered."""
ANY_GPU: GpuId = (0, 0)
"""Where a host-and-guest pair is priced: one GPU, the same for every slot."""


@dataclass(frozen=True, slots=True)
class PlanOffer:
    plan: Plan
    ratio: float
    """Goodput under ``plan`` over goodput under full backprop, on the gang's GPUs."""
    timing: GangTiming | None
    """``None``: the oracle cannot time it (no profile): it offers no slot."""
    open_gpus: tuple[tuple[float, GpuId, int], ...]
    """``(-idle, gpu, memory used)`` of each GPU where its workers leave at least
    ``MIN_SLACK`` of the GPU's time idle (none when it cannot be timed)."""
    alone_on: tuple[GangTiming, ...] = ()
    """Per open GPU, in the same order, ``timing`` reduced to that GPU alone, as if on
    :data:`ANY_GPU`: alone with one guest, the gang's other GPUs share nothing, so it gives
    the same co-located times, and slots of gangs of one shape price alike."""


@dataclass(frozen=True, slots=True)
class GangOffers:
    current: PlanOffer
    """The plan it runs (its ratio is 1 under full backprop)."""
    full: PlanOffer | None
    """Back to full backprop in place, for a gang that runs a staircase now."""
    staircases: tuple[PlanOffer, ...]
    """Its best SPB plans other than the current one that keep ``host_keep`` of its goodput,
    best first (empty unless it may host: ``spb = auto``, its whole gang of two or more)."""


class GangOfferMemo:
    """Per running job, its :class:`GangOffers` under the plan and GPUs it last had."""

    def __init__(
        self, catalog: PlanCatalog, *, hosts: bool, host_keep: float, keep: bool = True
    ) -> None:
        """``keep=False``: every call builds afresh (the reference the kept answers are
        tested against)."""
        self.catalog = catalog
        self.hosts = hosts
        self.host_keep = host_keep
        self.keep = keep
        self._kept: dict[
            str, tuple[tuple[object, ...], GangOffers | None, Job, SPBPlan, Placement]
        ] = {}
        """Per job id: the key its offers were built for, the offers, and the job, plan and
        GPUs of the last ask (the same objects have the same key)."""
        self.built = 0
        """Offers built so far, kept or not (for tests and profiles)."""

    @property
    def kept(self) -> int:
        """Gangs whose offers are kept now."""
        return len(self._kept)

    def offers(self, job: Job, plan: SPBPlan, placement: Placement) -> GangOffers | None:
        """What ``job``, running ``plan`` on ``placement``, offers (``None``: it has no
        goodput under full backprop there, so no configuration of it is priced)."""
        kept = self._kept.get(job.id)
        if kept is not None and kept[2] is job and kept[3] is plan and kept[4] is placement:
            return kept[1]  # the very objects of the last ask: its key too
        key = (self.catalog.options_key(job), plan, placement)
        if kept is not None and kept[0] == key:
            found = kept[1]
        else:
            found = self._build(job, plan, placement)
        if self.keep:
            self._kept[job.id] = (key, found, job, plan, placement)
        return found

    def forget_unless(self, holding: Sequence[Job]) -> None:
        """Drop the gangs no longer running (``holding``: the round's jobs that hold GPUs),
        and the catalog's footprints of them, once more are kept than run (a long replay
        would otherwise keep every job it ever ran; their ids are read only then)."""
        if len(self._kept) > 2 * len(holding) + 64:
            running = {job.id for job in holding}
            for job_id in [j for j in self._kept if j not in running]:
                del self._kept[job_id]
            self.catalog.forget(running)

    def _build(self, job: Job, plan: SPBPlan, placement: Placement) -> GangOffers | None:
        self.built += 1
        catalog = self.catalog
        full = full_backprop(len(placement), plan.num_blocks)
        base = catalog.goodput(job, full, placement)
        if base <= 0:
            return None
        if plan.is_full_backprop:
            return GangOffers(
                self._offer(job, plan, placement, 1.0), None, self._spb(job, plan, placement, base)
            )
        ratio = catalog.goodput(job, plan, placement) / base
        current = self._offer(job, plan, placement, ratio)
        back = self._offer(job, full, placement, 1.0)
        return GangOffers(current, back, self._spb(job, plan, placement, base))

    def _spb(
        self, job: Job, plan: SPBPlan, placement: Placement, base: float
    ) -> tuple[PlanOffer, ...]:
        if not self.hosts or not job.spec.plan_request.is_auto:
            return ()
        if len(placement) != job.spec.workers or len(placement) < 2:
            return ()
        catalog = self.catalog
        options = [o for o in catalog.options(job) if not o.is_full_backprop and o.plan != plan]
        found: list[PlanOffer] = []
        for option in options[:SPB_PLANS_PER_HOST]:
            ratio = catalog.goodput(job, option.plan, placement) / base
            if ratio >= self.host_keep:
                found.append(self._offer(job, option.plan, placement, ratio))
        return tuple(found)

    def _offer(self, job: Job, plan: Plan, placement: Placement, ratio: float) -> PlanOffer:
        timing = self.catalog.timing(job, plan, placement)
        if timing is None:
            return PlanOffer(plan, ratio, None, ())
        open_gpus = tuple(
            (-(1.0 - load), gpu, used)
            for gpu, load, used in self.catalog.footprint(job, plan, placement)
            if load <= 1.0 - MIN_SLACK
        )
        busy = dict(timing.busy_s)
        alone_on = tuple(
            GangTiming(timing.alone_s, ((ANY_GPU, busy[gpu]),), timing.profile)
            for _, gpu, _ in open_gpus
        )
        return PlanOffer(plan, ratio, timing, open_gpus, alone_on)
