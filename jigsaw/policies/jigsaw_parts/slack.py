"""Cluster-level plan choice: a running gang switches to an SPB plan so a waiting
one-worker job runs in the slack it opens (docs/SCHEDULER.md, "jigsaw", step 5).

A *slot* is one GPU of a running ``spb: auto`` gang (the *host*) that holds only the host's
worker, under one of the host's SPB plans: the GPU of its least-loaded partial rank. Placing a
waiting one-worker job (the *guest*) there means re-planning the host in place (a lease
boundary, no restart) and sharing that GPU between the two, priced by the oracle's co-location
model (:mod:`jigsaw.oracle.colocation`: time-slicing by default).

A slot is taken when it pays for the cluster: the sum over the affected jobs (the host, the
jobs already sharing the host's GPUs, the guest) of goodput (eta x iterations per second)
normalised by each job's exclusive goodput rises by at least ``pack_gain``, and the host keeps
at least ``host_keep`` of its goodput (the fairness guard for the job that gives). Memory is a
hard limit: the host's worker under the new plan plus the guest fit the GPU.

With ``share_full_backprop`` (the ``timeslice`` policy, Gandiva-style) a slot is instead
any GPU of a running gang, of any size and plan, that holds only that gang's worker, under
the plan the host runs: nobody switches plan, the guest takes turns with a full-backprop
worker, and the same gain rule decides (the co-location model prices what the turns cost).

Cost: hosts are found once per round (:mod:`jigsaw.policies.jigsaw_parts.slack_offers`); each guest
looks at no more than ``max_slots`` slots; a guest like one that already found nothing (same
model and batch) since the last booking is not weighed again; after ``max_misses`` guests in
a row found nothing, or ``max_hosts_per_round`` hosts took guests, the round stops looking.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from jigsaw.model.cluster import GpuId, Placement
from jigsaw.model.decisions import Replan, Start
from jigsaw.model.domain import Job
from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.plan import Plan
from jigsaw.oracle import GangTiming, Oracle, SharingProfile
from jigsaw.policies.jigsaw_parts.slack_offers import Offer, find_offers
from jigsaw.policies.shared.packing import GpuLedger
from jigsaw.policies.shared.plans import Footprint, PlanCatalog, PlanOption

_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class SlackOptions:
    pack_gain: float
    host_keep: float
    min_plan_hold_s: float
    max_slots: int = 6
    max_misses: int = 8
    plans_per_host: int = 3
    max_hosts_per_round: int = 16
    completion_guard: bool = True
    """Also require the packing to raise the rate at which the affected jobs complete
    (``sum(speed / remaining time)``), not only their summed normalised goodput."""
    share_full_backprop: bool = False
    """Offer every running gang's GPUs under the plan it runs (no SPB switch), not only the
    slack an SPB plan opens (the module docstring)."""
    policy_name: str = "jigsaw"
    """Who the decisions' reasons name."""


@dataclass(frozen=True, slots=True)
class Squeeze:
    """Guests placed in a host's slack: their starts and, when the host changes plan, its
    in-place re-plan (which comes first)."""

    starts: tuple[Start, ...]
    replan: Replan | None
    host_id: str
    gain: float


_Guest = tuple[Job, PlanOption]


class SlackMarket:
    """One round's view of the slack running gangs could open, and who may use it."""

    def __init__(
        self,
        catalog: PlanCatalog,
        oracle: Oracle,
        options: SlackOptions,
        *,
        running: Sequence[Job],
        queue: Sequence[Job],
        ledger: GpuLedger,
        footprints: dict[str, Footprint],
        gone: set[str],
        now: float,
    ) -> None:
        self.catalog = catalog
        self.oracle = oracle
        self.options = options
        self.ledger = ledger
        self.footprints = footprints
        self.gone = gone
        self.now = now
        self.taken: set[str] = set()
        """Guests this market started (the policy skips them in its own walk)."""
        self._queue = [job for job in queue if job.spec.workers == 1]
        self._queue_index = {job.id: i for i, job in enumerate(self._queue)}
        self._running = {job.id: job for job in running}
        self._plans: dict[str, Plan] = {job.id: job.plan for job in running if job.plan is not None}
        self._placements: dict[str, Placement] = {job.id: job.placement for job in running}
        self._on_gpu: dict[GpuId, list[str]] = {}
        for job in running:
            for gpu in dict.fromkeys(job.placement):
                self._on_gpu.setdefault(gpu, []).append(job.id)
        self._offers: list[Offer] | None = None
        self._switched: set[str] = set()
        self._misses = 0
        self._hosts_used = 0
        self._failed: set[tuple[str, int]] = set()
        """(model, batch) of guests that found no slot since the last booking."""
        self._before: dict[str, tuple[dict[str, float], float, dict[str, GangTiming]]] = {}
        """Per host: normalised goodput of it and of each neighbour, its own goodput, and
        their timings, as booked now (dropped when the host is booked)."""

    # -- the one entry point ----------------------------------------------------------------
    def place(self, guest: Job) -> Squeeze | None:
        """Put ``guest`` (a waiting one-worker job), and when a host must switch plan the
        next one-worker jobs of the queue too, into a host's slack if that pays; book it."""
        if guest.spec.workers != 1 or guest.id in self.taken:
            return None
        if (
            self._misses >= self.options.max_misses
            or self._hosts_used >= self.options.max_hosts_per_round
        ):
            return None
        kind = (guest.spec.model, guest.spec.batch_size)
        if kind in self._failed:
            return None
        guest_option = self.catalog.default_option(guest)
        if guest_option.goodput <= 0.0:
            return None
        best: tuple[float, Offer, list[tuple[_Guest, GpuId]]] | None = None
        looked = 0
        for offer in self._all_offers():
            if looked >= self.options.max_slots:
                break
            gpus = self._open_gpus(offer)
            if not gpus:
                continue
            looked += 1
            guests = [(guest, guest_option)]
            if self._plans[offer.host.id] != offer.option.plan:
                guests += self._followers(guest, len(gpus) - 1)
            assignment = list(zip(guests, gpus, strict=False))
            gain = self._gain(offer, assignment)
            if gain is not None and (best is None or gain > best[0]):
                best = (gain, offer, assignment)
        if best is None:
            self._misses += 1
            self._failed.add(kind)
            return None
        self._misses = 0
        self._failed.clear()
        self._hosts_used += 1
        return self._book(best[1], best[2], best[0])

    # -- offers -----------------------------------------------------------------------------
    def _all_offers(self) -> list[Offer]:
        if self._offers is None:
            self._offers = find_offers(
                self._running.values(),
                self._plans,
                self.catalog,
                gone=self.gone,
                host_keep=self.options.host_keep,
                plans_per_host=self.options.plans_per_host,
                share_full_backprop=self.options.share_full_backprop,
            )
        return self._offers

    def _open_gpus(self, offer: Offer) -> list[GpuId]:
        host = offer.host
        if host.id in self.gone:
            return []
        if self._plans[host.id] != offer.option.plan:
            if host.id in self._switched:
                return []  # switched this round: its other offers follow its new plan
            changed = host.plan_changed_at
            if changed is not None and self.now - changed < self.options.min_plan_hold_s:
                return []  # gave goodput up for slack, or took it back, too recently
        return [gpu for gpu in offer.gpus if self.ledger.workers.get(gpu, 0) == 1]

    def _followers(self, guest: Job, count: int) -> list[_Guest]:
        """Up to ``count`` one-worker jobs queued after ``guest``, not placed yet."""
        found: list[_Guest] = []
        start = self._queue_index.get(guest.id, len(self._queue)) + 1
        for job in self._queue[start:]:
            if len(found) >= count:
                break
            if job.id in self.taken or job.id in self._running:
                continue
            option = self.catalog.default_option(job)
            if option.goodput > 0.0:
                found.append((job, option))
        return found

    # -- the gain ---------------------------------------------------------------------------
    def _gain(self, offer: Offer, assignment: list[tuple[_Guest, GpuId]]) -> float | None:
        """Normalised goodput summed over the host, its GPUs' other jobs and the guests,
        after minus before; None when it is below ``pack_gain``, the host would keep less
        than ``host_keep`` of its goodput, or memory would not fit."""
        host, option = offer.host, offer.option
        if not self._memory_fits(offer, assignment):
            return None
        neighbours = self._neighbours(host.id)
        booked = self._booked(host.id, neighbours)
        if booked is None:
            return None
        before_each, host_before, before_timings = booked
        before = sum(before_each.values())
        host_timing = self.catalog.timing(host, option.plan, host.placement)
        if host_timing is None:
            return None
        after_timings = {**before_timings, host.id: host_timing}
        for (guest, guest_option), gpu in assignment:
            alone = 1.0 / guest_option.goodput * guest_option.eta
            after_timings[guest.id] = GangTiming(
                alone, ((gpu, guest_option.loads[0] * alone),), self._profile(guest)
            )
        after_times = self.oracle.colocation.iteration_times(after_timings)
        after = 0.0
        completions = 0.0  # change of sum(normalised speed / remaining exclusive seconds)
        for job_id in neighbours:
            job = self._running[job_id]
            exclusive = self.catalog.default_option(job).goodput
            eta = option.eta if job_id == host.id else self.catalog.eta(job, self._plans[job_id])
            speed = eta / after_times[job_id] / exclusive
            after += speed
            completions += (speed - before_each[job_id]) / self._remaining_s(job, running=True)
        if option.eta / after_times[host.id] < self.options.host_keep * host_before - _EPS:
            return None
        for (guest, guest_option), _ in assignment:
            speed = guest_option.eta / after_times[guest.id] / guest_option.goodput
            after += speed
            completions += speed / self._remaining_s(guest, running=False)
        gain = after - before
        if gain < self.options.pack_gain:
            return None
        if self.options.completion_guard and completions <= 0.0:
            return None
        return gain

    def _remaining_s(self, job: Job, *, running: bool) -> float:
        """Seconds the job still needs on GPUs of its own (its best exclusive plan). For a
        running job the progress since its run started is estimated at that plan's speed,
        which errs towards less remaining (so towards protecting a host near its end)."""
        option = self.catalog.default_option(job)
        iteration_s = option.eta / option.goodput
        done = job.iterations_done
        if running and job.run_started_at is not None:
            done += max(self.now - job.run_started_at, 0.0) / iteration_s
        return max(job.spec.iterations - done, 1.0) * iteration_s

    def _booked(
        self, host_id: str, neighbours: list[str]
    ) -> tuple[dict[str, float], float, dict[str, GangTiming]] | None:
        cached = self._before.get(host_id)
        if cached is not None:
            return cached
        timings: dict[str, GangTiming] = {}
        for job_id in neighbours:
            timing = self._timing(job_id, self._plans[job_id])
            if timing is None:
                return None
            timings[job_id] = timing
        times = self.oracle.colocation.iteration_times(timings)
        each: dict[str, float] = {}
        for job_id in neighbours:
            job = self._running[job_id]
            exclusive = self.catalog.default_option(job).goodput
            each[job_id] = self.catalog.eta(job, self._plans[job_id]) / times[job_id] / exclusive
        host = self._running[host_id]
        own = self.catalog.eta(host, self._plans[host_id]) / times[host_id]
        self._before[host_id] = (each, own, timings)
        return self._before[host_id]

    def _memory_fits(self, offer: Offer, assignment: list[tuple[_Guest, GpuId]]) -> bool:
        host = offer.host
        current = self.footprints.get(host.id, ())
        new = self.catalog.footprint(host, offer.option.plan, host.placement)
        for (_, guest_option), gpu in assignment:
            used = self.ledger.memory_used[gpu]
            used -= sum(memory for g, _, memory in current if g == gpu)
            used += sum(memory for g, _, memory in new if g == gpu)
            if used + guest_option.memories[0] > self.ledger.memory_total[gpu]:
                return False
        return True

    def _neighbours(self, job_id: str) -> list[str]:
        """The job and every job on one of its GPUs, in a stable order."""
        found = dict.fromkeys([job_id])
        for gpu in self._placements[job_id]:
            for other in self._on_gpu.get(gpu, ()):
                found[other] = None
        return list(found)

    def _profile(self, job: Job) -> SharingProfile | None:
        try:
            return self.oracle.sharing_profile(job.spec.model, job.spec.batch_size)
        except InvalidSpecError:
            return None

    def _timing(self, job_id: str, plan: Plan) -> GangTiming | None:
        job = self._running[job_id]
        return self.catalog.timing(job, plan, self._placements[job_id])

    # -- booking ----------------------------------------------------------------------------
    def _book(self, offer: Offer, assignment: list[tuple[_Guest, GpuId]], gain: float) -> Squeeze:
        host, option = offer.host, offer.option
        ledger = self.ledger
        for cached in [h for h, entry in self._before.items() if host.id in entry[2]]:
            del self._before[cached]
        replan: Replan | None = None
        names = ", ".join(guest.id for (guest, _), _ in assignment)
        if self._plans[host.id] != option.plan:
            ledger.remove_all(self.footprints[host.id])
            footprint = self.catalog.footprint(host, option.plan, host.placement)
            ledger.add_all(footprint)
            self.footprints[host.id] = footprint
            self._plans[host.id] = option.plan
            self._switched.add(host.id)
            replan = Replan(
                host.id,
                option.plan,
                host.placement,
                f"jigsaw: re-plan to {option.label} in place, slack for {names}",
            )
        starts: list[Start] = []
        for (guest, guest_option), gpu in assignment:
            placement: Placement = (gpu,)
            guest_footprint = self.catalog.footprint(guest, guest_option.plan, placement)
            ledger.add_all(guest_footprint)
            self.footprints[guest.id] = guest_footprint
            self._running[guest.id] = guest
            self._plans[guest.id] = guest_option.plan
            self._placements[guest.id] = placement
            self._on_gpu.setdefault(gpu, []).append(guest.id)
            self.taken.add(guest.id)
            starts.append(Start(guest.id, placement, guest_option.plan, self._reason(offer, gain)))
        return Squeeze(tuple(starts), replan, host.id, gain)

    def _reason(self, offer: Offer, gain: float) -> str:
        who, host, label = self.options.policy_name, offer.host.id, offer.option.label
        if self.options.share_full_backprop:
            return f"{who}: packed, time-sliced with {host} (plan {label}), gain {gain:.2f}"
        return f"{who}: packed into {host}'s slack (plan {label}), gain {gain:.2f}"
