"""Cluster-level plan choice: a running gang switches to an SPB plan so a waiting
one-worker job runs in the slack it opens (docs/SCHEDULER.md, "jigsaw", step 5).

A *slot* is one GPU of a running ``spb: auto`` gang (the *host*) that holds only the host's
worker, under one of the host's SPB plans: the GPU of its least-loaded partial rank. Placing a
waiting one-worker job (the *guest*) there means re-planning the host in place (a lease
boundary, no restart) and time-slicing that GPU between the two
(:mod:`jigsaw.oracle.timeslicing`).

A slot is taken when it pays for the cluster: the sum over the affected jobs (the host, the
jobs already sharing the host's GPUs, the guest) of goodput (eta x iterations per second)
normalised by each job's exclusive goodput rises by at least ``pack_gain``, and the host keeps
at least ``host_keep`` of its goodput (the fairness guard for the job that gives). Memory is a
hard limit: the host's worker under the new plan plus the guest fit the GPU.

Cost: hosts are found once per round; each guest looks at no more than ``max_slots`` slots,
and after ``max_misses`` guests in a row found nothing, the round stops looking.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from jigsaw.cluster import GpuId, Placement
from jigsaw.decisions import Replan, Start
from jigsaw.domain import Job
from jigsaw.oracle import GangTiming, Oracle, timesliced_iteration_times
from jigsaw.plan import Plan
from jigsaw.policies.packing import GpuLedger
from jigsaw.policies.plans import Footprint, PlanCatalog, PlanOption

_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class SlackOptions:
    pack_gain: float
    host_keep: float
    min_plan_hold_s: float
    max_slots: int = 24
    max_misses: int = 8
    plans_per_host: int = 3


@dataclass(frozen=True, slots=True)
class _Slot:
    host: Job
    option: PlanOption
    gpu: GpuId


@dataclass(frozen=True, slots=True)
class Squeeze:
    """A guest placed in a host's slack: the guest's start and, when the host changes plan,
    its in-place re-plan."""

    start: Start
    replan: Replan | None
    host_id: str
    gain: float


class SlackMarket:
    """One round's view of the slack running gangs could open, and who may use it."""

    def __init__(
        self,
        catalog: PlanCatalog,
        oracle: Oracle,
        options: SlackOptions,
        *,
        running: Sequence[Job],
        ledger: GpuLedger,
        footprints: dict[str, Footprint],
        gone: set[str],
        now: float,
        last_plan_change: dict[str, float],
    ) -> None:
        self.catalog = catalog
        self.oracle = oracle
        self.options = options
        self.ledger = ledger
        self.footprints = footprints
        self.gone = gone
        self.now = now
        self.last_plan_change = last_plan_change
        self._running = {job.id: job for job in running}
        self._plans: dict[str, Plan] = {
            job.id: job.plan for job in running if job.plan is not None
        }
        self._placements: dict[str, Placement] = {job.id: job.placement for job in running}
        self._on_gpu: dict[GpuId, list[str]] = {}
        for job in running:
            for gpu in dict.fromkeys(job.placement):
                self._on_gpu.setdefault(gpu, []).append(job.id)
        self._slots: list[_Slot] | None = None
        self._switched: set[str] = set()
        self._misses = 0

    # -- the one entry point ----------------------------------------------------------------
    def place(self, guest: Job) -> Squeeze | None:
        """Put a waiting one-worker job into some host's slack if that pays; book it."""
        if guest.spec.workers != 1 or self._misses >= self.options.max_misses:
            return None
        guest_option = self.catalog.default_option(guest)
        if guest_option.goodput <= 0.0:
            return None
        slots = self._all_slots()
        best: tuple[float, _Slot] | None = None
        looked = 0
        for slot in slots:
            if looked >= self.options.max_slots:
                break
            if not self._open(slot):
                continue
            looked += 1
            gain = self._gain(slot, guest, guest_option)
            if gain is not None and (best is None or gain > best[0]):
                best = (gain, slot)
        if best is None:
            self._misses += 1
            return None
        self._misses = 0
        return self._book(best[1], guest, guest_option, best[0])

    # -- slots ------------------------------------------------------------------------------
    def _all_slots(self) -> list[_Slot]:
        if self._slots is not None:
            return self._slots
        slots: list[tuple[float, int, _Slot]] = []
        for order, host in enumerate(self._running.values()):
            if not self._can_host(host):
                continue
            current = self._plans[host.id]
            options = self.catalog.options(host)
            best = options[0].goodput
            offered = 0
            for option in options:
                if offered >= self.options.plans_per_host:
                    break
                if option.is_full_backprop or option.goodput < self.options.host_keep * best:
                    continue
                if current != option.plan and not current.is_full_backprop:
                    continue  # a host already on SPB offers its own plan's slack only
                rank = min(range(len(option.loads)), key=lambda r: (option.loads[r], -r))
                if option.plan.depths[rank] == 0:
                    continue
                offered += 1
                slot = _Slot(host, option, host.placement[rank])
                slots.append((option.loads[rank], order, slot))
        slots.sort(key=_slot_key)
        self._slots = [slot for _, _, slot in slots]
        return self._slots

    def _can_host(self, host: Job) -> bool:
        spec = host.spec
        if spec.workers < 2 or not spec.plan_request.is_auto or host.id in self.gone:
            return False
        if len(set(host.placement)) != spec.workers or host.id not in self._plans:
            return False
        return self.catalog.default_option(host).goodput > 0.0

    def _open(self, slot: _Slot) -> bool:
        host = slot.host
        if host.id in self.gone or self.ledger.workers.get(slot.gpu, 0) != 1:
            return False
        current = self._plans[host.id]
        if current == slot.option.plan:
            return True
        if host.id in self._switched:
            return False  # switched this round: its other slots follow its new plan
        changed = self.last_plan_change.get(host.id)
        return changed is None or self.now - changed >= self.options.min_plan_hold_s

    # -- the gain ---------------------------------------------------------------------------
    def _gain(self, slot: _Slot, guest: Job, guest_option: PlanOption) -> float | None:
        host, option, gpu = slot.host, slot.option, slot.gpu
        if not self._memory_fits(slot, guest_option):
            return None
        neighbours = self._neighbours(host.id)
        before_timings = {j: self._timing(j, self._plans[j]) for j in neighbours}
        if any(t is None for t in before_timings.values()):
            return None
        before_times = timesliced_iteration_times(_known(before_timings))
        host_timing = self.oracle.timing(
            host.spec.model, host.spec.batch_size, option.plan, host.placement
        )
        guest_alone = 1.0 / guest_option.goodput
        guest_timing = GangTiming(
            guest_alone, ((gpu, guest_option.loads[0] * guest_alone),)
        )
        after_timings = {**_known(before_timings), host.id: host_timing, guest.id: guest_timing}
        after_times = timesliced_iteration_times(after_timings)
        before = after = 0.0
        for job_id in neighbours:
            plan = self._plans[job_id]
            job = self._running[job_id]
            exclusive = self.catalog.default_option(job).goodput
            eta_before = self.catalog.eta(job, plan)
            eta_after = option.eta if job_id == host.id else eta_before
            before += eta_before / before_times[job_id] / exclusive
            after += eta_after / after_times[job_id] / exclusive
            if job_id == host.id:
                host_before = eta_before / before_times[job_id]
                host_after = eta_after / after_times[job_id]
                if host_after < self.options.host_keep * host_before - _EPS:
                    return None
        guest_share = (1.0 / after_times[guest.id]) / guest_option.goodput * guest_option.eta
        gain = after + guest_share - before
        return gain if gain >= self.options.pack_gain else None

    def _memory_fits(self, slot: _Slot, guest_option: PlanOption) -> bool:
        host, gpu = slot.host, slot.gpu
        current = self.footprints.get(host.id, ())
        new = self.catalog.footprint(host, slot.option.plan, host.placement)
        used = self.ledger.memory_used[gpu]
        used -= sum(memory for g, _, memory in current if g == gpu)
        used += sum(memory for g, _, memory in new if g == gpu)
        return used + guest_option.memories[0] <= self.ledger.memory_total[gpu]

    def _neighbours(self, job_id: str) -> list[str]:
        """The job and every job on one of its GPUs, in a stable order."""
        found = dict.fromkeys([job_id])
        for gpu in self._placements[job_id]:
            for other in self._on_gpu.get(gpu, ()):
                found[other] = None
        return list(found)

    def _timing(self, job_id: str, plan: Plan) -> GangTiming | None:
        job = self._running[job_id]
        return self.catalog.timing(job, plan, self._placements[job_id])

    # -- booking ----------------------------------------------------------------------------
    def _book(self, slot: _Slot, guest: Job, guest_option: PlanOption, gain: float) -> Squeeze:
        host, option = slot.host, slot.option
        ledger = self.ledger
        replan: Replan | None = None
        if self._plans[host.id] != option.plan:
            ledger.remove_all(self.footprints[host.id])
            footprint = self.catalog.footprint(host, option.plan, host.placement)
            ledger.add_all(footprint)
            self.footprints[host.id] = footprint
            self._plans[host.id] = option.plan
            self._switched.add(host.id)
            self.last_plan_change[host.id] = self.now
            replan = Replan(
                host.id, option.plan, host.placement,
                f"jigsaw: re-plan to {option.label} in place, slack for {guest.id}",
            )
        placement: Placement = (slot.gpu,)
        guest_footprint = self.catalog.footprint(guest, guest_option.plan, placement)
        ledger.add_all(guest_footprint)
        self.footprints[guest.id] = guest_footprint
        self._running[guest.id] = guest
        self._plans[guest.id] = guest_option.plan
        self._placements[guest.id] = placement
        self._on_gpu.setdefault(slot.gpu, []).append(guest.id)
        start = Start(
            guest.id, placement, guest_option.plan,
            f"jigsaw: packed into {host.id}'s slack (plan {option.label}), "
            f"gain {gain:.2f}",
        )
        return Squeeze(start, replan, host.id, gain)


def _known(timings: dict[str, GangTiming | None]) -> dict[str, GangTiming]:
    return {job_id: timing for job_id, timing in timings.items() if timing is not None}


def _slot_key(item: tuple[float, int, _Slot]) -> tuple[float, int]:
    return item[0], item[1]

