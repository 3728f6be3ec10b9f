"""What each SPB plan of a job would cost: loads, memory, eta and goodput, cached.

The candidate plans are the planner's (:meth:`jigsaw.planning.planner.Planner.candidates`): under
``spb = auto`` full backprop (``none``), ``staircase`` and ``uniform:k`` for k in 1..K-1; a
job with a fixed plan, a pipeline or a hybrid has that plan only. Costs come from
the oracle once per (model, batch, workers, spb) and once per (job, plan, placement); a round
then only reads dictionaries.

A model the oracle has no profile for (a user's ``package.mod:fn``) still schedules: it runs
full backprop and its workers count as filling their GPUs, so nothing is packed next to it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from jigsaw.efficiency.online import job_eta
from jigsaw.efficiency.table import EtaEstimate
from jigsaw.model.cluster import GpuId, Placement
from jigsaw.model.domain import Job
from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.plan import Plan, SPBPlan, full_backprop
from jigsaw.oracle import GangTiming, Oracle
from jigsaw.planning.planner import Planner

Footprint = tuple[tuple[GpuId, float, int], ...]
"""Per GPU of a placement: (gpu, summed load of the job's workers there, their memory)."""

EtaOf = Callable[[str, SPBPlan], float]
_FOOTPRINTS_PER_JOB = 8


@dataclass(frozen=True, slots=True)
class PlanOption:
    label: str
    plan: Plan
    loads: tuple[float, ...]
    """Per rank: share of a GPU's time the worker keeps busy (job alone, compact)."""
    memories: tuple[int, ...]
    eta: float
    goodput: float
    """eta / iteration time, job alone on a compact placement."""

    @property
    def is_full_backprop(self) -> bool:
        """No worker skips any backward: full-backprop data parallelism, or a pipeline or
        hybrid plan (which SPB does not apply to)."""
        return not isinstance(self.plan, SPBPlan) or self.plan.is_full_backprop


class PlanCatalog:
    def __init__(
        self,
        oracle: Oracle,
        *,
        spb: bool = True,
        eta_of: EtaOf | None = None,
        opaque_load: float = 1.0,
        planner: Planner,
    ) -> None:
        self.oracle = oracle
        self.planner = planner
        self.spb = spb
        self._eta_of: EtaOf = eta_of if eta_of is not None else oracle.eta
        self._opaque_load = opaque_load
        self._options: dict[tuple[object, ...], tuple[PlanOption, ...]] = {}
        self._footprints: dict[str, dict[tuple[Plan, Placement], Footprint]] = {}
        """Per job, its footprints by (plan, placement): a round prices a running gang's
        current plan and its alternatives on its GPUs, and the next round asks again."""

    def options_key(self, job: Job) -> tuple[object, ...]:
        """What a job's options (and footprints) depend on: jobs with equal keys have the
        same options."""
        spec = job.spec
        key: tuple[object, ...] = (
            spec.model,
            spec.batch_size,
            spec.workers,
            spec.spb,
            spec.parallelism,
        )
        if job.block_noise:
            # Priced with the job's own online eta: one entry per job and measurement.
            key = (*key, job.id, tuple(entry.last_iteration for entry in job.block_noise))
        return key

    def options(self, job: Job) -> tuple[PlanOption, ...]:
        """Candidate plans, best goodput first (full backprop wins ties)."""
        key = self.options_key(job)
        cached = self._options.get(key)
        if cached is None:
            cached = self._options[key] = self._build_options(job)
        return cached

    def default_option(self, job: Job) -> PlanOption:
        """The plan the job runs on GPUs of its own: the best exclusive goodput."""
        return self.options(job)[0]

    def footprint(self, job: Job, plan: Plan, placement: Placement) -> Footprint:
        cached = self._footprints.get(job.id)
        if cached is None:
            cached = self._footprints[job.id] = {}
        footprint = cached.get((plan, placement))
        if footprint is None:
            if len(cached) >= _FOOTPRINTS_PER_JOB:
                cached.clear()  # trial placements of a waiting gang: keep the memory bounded
            footprint = cached[plan, placement] = self._build_footprint(job, plan, placement)
        return footprint

    def goodput(self, job: Job, plan: Plan, placement: Placement) -> float:
        try:
            prediction = self.oracle.predict(job.spec.model, job.spec.batch_size, plan, placement)
        except InvalidSpecError:
            return 0.0
        return self.eta(job, plan) / prediction.iteration_time_s

    def eta(self, job: Job, plan: Plan) -> float:
        """Statistical efficiency of ``plan`` for this job: online from the gradient noise its
        lease reports measured (:mod:`jigsaw.efficiency.online`) once every block has enough
        observations, else the model's figure (the ``eta_of`` seam)."""
        if not isinstance(plan, SPBPlan) or plan.is_full_backprop:
            return 1.0
        model = job.spec.model
        if job.block_noise and plan.num_blocks >= len(job.block_noise):
            estimate = job_eta(job, plan, lambda p: EtaEstimate(self._eta_of(model, p), "model"))
            return estimate.eta
        return self._eta_of(model, plan)

    def timing(self, job: Job, plan: Plan, placement: Placement) -> GangTiming | None:
        """Iteration time alone and compute per GPU (None for a model without a profile)."""
        try:
            return self.oracle.timing(job.spec.model, job.spec.batch_size, plan, placement)
        except InvalidSpecError:
            return None

    def forget(self, keep: set[str]) -> None:
        """Drop cached footprints of jobs that are gone (called now and then)."""
        for job_id in [j for j in self._footprints if j not in keep]:
            del self._footprints[job_id]

    @property
    def cached_footprints(self) -> int:
        return len(self._footprints)

    # -- internals ------------------------------------------------------------------------
    def _build_options(self, job: Job) -> tuple[PlanOption, ...]:
        spec = job.spec
        if not self.planner.catalog.has_profile(spec.model):
            opaque = full_backprop(spec.workers, 1)
            loads = (self._opaque_load,) * spec.workers
            return (PlanOption("none", opaque, loads, (0,) * spec.workers, 1.0, 0.0),)
        plans = self.planner.candidates(spec, spb=self.spb)
        options: list[PlanOption] = []
        seen: set[Plan] = set()
        compact = self.oracle.compact(spec.workers)
        for label, plan in plans:
            if plan in seen:
                continue
            seen.add(plan)
            model, batch = spec.model, spec.batch_size
            prediction = self.oracle.predict(model, batch, plan, compact)
            eta = self.eta(job, plan)
            options.append(
                PlanOption(
                    label,
                    plan,
                    tuple(
                        self.oracle.worker_load(model, batch, plan, r)
                        for r in range(plan.num_workers)
                    ),
                    prediction.per_worker_memory_bytes,
                    eta,
                    eta / prediction.iteration_time_s,
                )
            )
        options.sort(key=lambda o: (-o.goodput, not o.is_full_backprop))
        return tuple(options)

    def _build_footprint(self, job: Job, plan: Plan, placement: Placement) -> Footprint:
        spec = job.spec
        try:
            loads = self.oracle.gpu_loads(spec.model, spec.batch_size, plan, placement)
            memory: dict[GpuId, int] = {}
            for rank, gpu in enumerate(placement):
                memory[gpu] = memory.get(gpu, 0) + self.oracle.worker_memory_bytes(
                    spec.model, spec.batch_size, plan, rank
                )
        except InvalidSpecError:
            loads = dict.fromkeys(placement, self._opaque_load)
            memory = dict.fromkeys(placement, 0)
        return tuple((gpu, loads[gpu], memory[gpu]) for gpu in dict.fromkeys(placement))
