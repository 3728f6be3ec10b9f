"""Step 4 of a jigsaw round: a place for one waiting job (docs/SCHEDULER.md, "jigsaw").

A job goes, in this order:

1. on free GPUs (compact), with its best exclusive plan, unless those GPUs are held for the
   best-ranked gang that did not fit (``Round.reserved``);
2. packed, with an SPB plan, next to other gangs' workers: plans are tried best first while
   their goodput is at least ``ratio`` of the exclusive plan's (a fair job asks more than a
   backfill), and the partial workers go where their load and memory fit;
3. for a job of the fair set only: on GPUs freed by preempting the victims (running,
   unprotected, outside the fair set), lowest-ranked first; undone if the gang still does
   not fit, and a victim whose GPUs the job does not take keeps running.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from jigsaw.model.cluster import Placement
from jigsaw.model.decisions import Decision, Preempt, Start
from jigsaw.model.domain import Job
from jigsaw.model.snapshot import Snapshot
from jigsaw.policies.shared.packing import GpuLedger
from jigsaw.policies.shared.plans import Footprint, PlanCatalog, PlanOption
from jigsaw.policies.speed.round_memory import ShapeSkip

_EPS = 1e-9


@dataclass(slots=True)
class Round:
    """One jigsaw round's bookings, changed as its steps place, pack and preempt."""

    snapshot: Snapshot
    ledger: GpuLedger
    footprints: dict[str, Footprint]
    """What each running or newly placed job has booked in ``ledger``."""
    victims: list[Job]
    """Running, unprotected jobs outside the fair set, lowest-ranked first."""
    unplaced: ShapeSkip
    """The job shapes that found no place in ``ledger`` this round."""
    decisions: list[Decision] = field(default_factory=list)
    """The preemptions taken so far."""
    preempted: set[str] = field(default_factory=set)
    reserved: int = 0
    """Free GPUs held for the best-ranked waiting job that could not be placed this round."""


class Placer:
    def __init__(
        self,
        catalog: PlanCatalog,
        *,
        packing: bool,
        fair_ratio: float,
        backfill_ratio: float,
        policy_name: str = "jigsaw",
    ) -> None:
        self.catalog = catalog
        self.policy_name = policy_name
        """Who the decisions' reasons name."""
        self.packing = packing
        self.fair_ratio = fair_ratio
        self.backfill_ratio = backfill_ratio

    def place(self, job: Job, is_fair: bool, state: Round) -> Start | None:
        """Book ``job`` where it goes first, in the module docstring's order; None if nowhere."""
        ledger = state.ledger
        best = self.catalog.default_option(job)
        placement = None
        if ledger.num_free - state.reserved >= job.spec.workers:
            placement = ledger.exclusive(job.spec.workers)
        if placement is not None:
            return self._commit(job, best, placement, "exclusive", state)
        ratio = self.fair_ratio if is_fair else self.backfill_ratio
        packed = self._packed(job, best, ratio, ledger)
        if packed is not None:
            return self._commit(job, packed[0], packed[1], "packed", state)
        if is_fair:
            placement = self._preempt_for(job, state)
            if placement is not None:
                return self._commit(job, best, placement, "fair share", state)
        return None

    def _packed(
        self, job: Job, best: PlanOption, ratio: float, ledger: GpuLedger
    ) -> tuple[PlanOption, Placement] | None:
        if not self.packing or job.spec.workers < 2 or not ledger.partial:
            return None
        if ledger.num_free == 0 and ledger.threshold - ledger.min_residual < 1.0 - _EPS:
            return None  # rank 0 trains every block: its load needs a GPU nearly to itself
        for option in self.catalog.options(job):
            if option.goodput < ratio * best.goodput:
                break
            if option.is_full_backprop:
                continue
            placement = ledger.packed(option.loads, option.memories)
            if placement is None:
                continue
            footprint = self.catalog.footprint(job, option.plan, placement)
            if all(ledger.fits(gpu, load, memory) for gpu, load, memory in footprint):
                return option, placement
        return None

    def _preempt_for(self, job: Job, state: Round) -> Placement | None:
        """Free GPUs by preempting victims, lowest-ranked first; undo if it still won't fit."""
        ledger = state.ledger
        available = [v for v in state.victims if v.id not in state.preempted]
        if ledger.num_free + sum(v.spec.workers for v in available) < job.spec.workers:
            return None
        freed: list[Job] = []
        placement: Placement | None = None
        for victim in available:
            ledger.remove_all(state.footprints[victim.id])
            freed.append(victim)
            placement = ledger.exclusive(job.spec.workers)
            if placement is not None:
                break
        if placement is None:
            for victim in freed:
                ledger.add_all(state.footprints[victim.id])
            return None
        # A victim none of whose GPUs the new gang takes was freed for nothing (a guest in a
        # gang's slack frees no GPU while its host stays): it keeps running.
        taken = set(placement)
        needed = [v for v in freed if taken.intersection(v.placement)]
        for victim in freed:
            if victim not in needed:
                ledger.add_all(state.footprints[victim.id])
        for victim in needed:
            state.preempted.add(victim.id)
            state.decisions.append(Preempt(victim.id, f"{self.policy_name}: outranked", by=job.id))
        return placement

    def _commit(
        self, job: Job, option: PlanOption, placement: Placement, how: str, state: Round
    ) -> Start:
        footprint = self.catalog.footprint(job, option.plan, placement)
        state.ledger.add_all(footprint)
        state.footprints[job.id] = footprint
        reason = f"{self.policy_name}: {how}, plan {option.label}"
        return Start(job.id, placement, option.plan, reason)
