"""The oracle: iteration time, memory, traffic and goodput of a plan on a placement.

``batch_size`` is always the *local* (per-worker) batch. Equations (docs/ORACLE.md):

    compute_r   = overhead + B * (F_1..K / rate + G_{d_r+1..K} / rate)
    W_g         = sum of compute_r over this job's workers on GPU g (they take turns)
    exposed(c, x) = tail * c + softplus((1 - tail) * c - overlap * x)
    T_alone     = max_g W_g * (1 + straggler * (g_node - 1)) + exposed(comm, max_g W_g)

Pipeline and hybrid plans are priced by :mod:`jigsaw.oracle.plan_predictions` (alone, compact);
on a placement their iteration stretches by the most loaded GPU's ``max(1, load)``, their own
workers on a shared GPU and other jobs' ``gpu_load`` included. Their eta is 1: every sample
trains every block (2BW's one-step weight delay is not priced).

With other jobs on the same GPUs (``gpu_load``: their share of each GPU's time) every GPU
whose summed load exceeds 1 slows everyone on it proportionally:
``s_g = max(1, gpu_load[g] + W_g / T_alone)`` and compute becomes ``W_g * s_g``. NICs work the
same way with ``nic_load`` (other jobs' share of each node's NIC time), slowing the
inter-node part of communication.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from jigsaw.efficiency.table import EfficiencyTable
from jigsaw.model.cluster import GpuId, Placement
from jigsaw.model.errors import InvalidPlanError, InvalidSpecError
from jigsaw.model.hardware import HardwareSpec
from jigsaw.model.parallelism import HybridPlan, PipelinePlan
from jigsaw.model.plan import Plan, SPBPlan, full_backprop
from jigsaw.oracle.colocation import ColocationModel, SharingSettings
from jigsaw.oracle.colocation_concurrent import sharing_profile
from jigsaw.oracle.costs import ModelCosts, PlanCosts, model_costs, plan_costs
from jigsaw.oracle.gang_timing import GangTiming, SharingProfile
from jigsaw.oracle.network import PlacementCosts, placement_costs
from jigsaw.oracle.parallel_profile import parallel_profile_of
from jigsaw.oracle.plan_predictions import PlanPrediction, predict_plan, replica_batch
from jigsaw.oracle.profile_catalog import ProfileCatalog

_MAX_PLACEMENT_CACHE = 200_000


@dataclass(frozen=True, slots=True)
class Prediction:
    per_worker_compute_s: tuple[float, ...]
    """Forward + backward of the trained suffix, after GPU time-sharing slow-down."""
    per_worker_memory_bytes: tuple[int, ...]
    per_worker_bytes_sent: tuple[int, ...]
    communication_s: float
    """All collectives of one iteration back to back, before overlap with backward."""
    iteration_time_s: float
    source: str
    """Profile source: ``"measured"`` or ``"analytic default"``."""


@dataclass(frozen=True, slots=True)
class _Alone:
    place: PlacementCosts
    compute_s: float
    iteration_s: float


class Oracle:
    def __init__(
        self,
        hardware: HardwareSpec,
        profiles: ProfileCatalog | None = None,
        efficiency: EfficiencyTable | None = None,
        sharing: SharingSettings | None = None,
    ) -> None:
        self.hardware = hardware
        self.profiles = profiles if profiles is not None else ProfileCatalog()
        self.efficiency = efficiency if efficiency is not None else EfficiencyTable.load()
        self.colocation = ColocationModel(hardware, sharing)
        """How gangs sharing a GPU slow each other (:mod:`jigsaw.oracle.colocation`): the
        policies, the simulated executors and the service price a shared GPU with it."""
        self._sharing: dict[tuple[str, int], SharingProfile] = {}
        self._models: dict[tuple[str, int], tuple[ModelCosts, str]] = {}
        self._plans: dict[tuple[str, int, tuple[int, ...]], PlanCosts] = {}
        self._alone: dict[tuple[str, int, tuple[int, ...], Placement], _Alone] = {}
        self._predictions: dict[tuple[str, int, tuple[int, ...], Placement], Prediction] = {}
        self._parallel: dict[tuple[str, int, PipelinePlan | HybridPlan], PlanPrediction] = {}

    # ----------------------------------------------------------------- public API

    def num_blocks(self, model: str) -> int:
        return self.profiles.get(model).num_blocks

    def source(self, model: str) -> str:
        return self.profiles.get(model).source

    def predict(
        self,
        model: str,
        batch_size: int,
        plan: Plan,
        placement: Placement,
        gpu_load: Mapping[GpuId, float] | None = None,
        nic_load: Mapping[int, float] | None = None,
    ) -> Prediction:
        if not isinstance(plan, SPBPlan):
            return self._predict_parallel(model, batch_size, plan, placement, gpu_load)
        key = (model, batch_size, plan.depths, placement)
        if not gpu_load and not nic_load:
            cached = self._predictions.get(key)
            if cached is not None:
                return cached
        costs = self._plan(model, batch_size, plan)
        alone = self._alone_costs(key, costs, placement)
        place = alone.place
        hw = self.hardware
        slowdown: dict[GpuId, float] = {}
        compute = 0.0
        for gpu, busy in place.gpu_busy_s:
            load = busy / alone.iteration_s + (gpu_load.get(gpu, 0.0) if gpu_load else 0.0)
            factor = load if load > 1.0 else 1.0
            slowdown[gpu] = factor
            compute = max(compute, busy * factor)
        net = 1.0
        if nic_load is not None or place.nic_busy_s:
            for node, busy in place.nic_busy_s:
                load = busy / alone.iteration_s + (nic_load.get(node, 0.0) if nic_load else 0.0)
                net = max(net, load)
        comm = place.local_comm_s + place.inter_node_comm_s * net
        straggle = 1.0 + hw.node_straggler_fraction * (place.gpus_on_busiest_node - 1)
        iteration = compute * straggle + self._exposed(comm, compute)
        prediction = Prediction(
            per_worker_compute_s=tuple(
                c * slowdown[gpu] for c, gpu in zip(costs.compute_s, placement, strict=True)
            ),
            per_worker_memory_bytes=costs.memory_bytes,
            per_worker_bytes_sent=costs.bytes_sent,
            communication_s=comm,
            iteration_time_s=iteration,
            source=self._models[(model, batch_size)][1],
        )
        if not gpu_load and not nic_load:
            self._predictions[key] = prediction
        return prediction

    def worker_load(
        self,
        model: str,
        batch_size: int,
        plan: Plan,
        rank: int,
        placement: Placement | None = None,
    ) -> float:
        """Share of a GPU's time worker ``rank`` keeps busy when its job runs alone
        (compute_r / iteration time); placement defaults to compact, one worker per GPU."""
        if not isinstance(plan, SPBPlan):
            chosen = placement if placement is not None else self.compact(plan.num_workers)
            parallel = self.predict_plan_type(model, batch_size, plan)
            alone_p = self._predict_parallel(model, batch_size, plan, chosen, None)
            return parallel.per_worker_compute_s[rank] / alone_p.iteration_time_s
        costs = self._plan(model, batch_size, plan)
        chosen = placement if placement is not None else self.compact(plan.num_workers)
        alone = self._alone_costs((model, batch_size, plan.depths, chosen), costs, chosen)
        return costs.compute_s[rank] / alone.iteration_s

    def gpu_loads(
        self, model: str, batch_size: int, plan: Plan, placement: Placement
    ) -> dict[GpuId, float]:
        """Share of each GPU's time this job keeps busy when it runs alone."""
        if not isinstance(plan, SPBPlan):
            busy = self._parallel_busy(model, batch_size, plan, placement)
            alone_s = self._predict_parallel(model, batch_size, plan, placement, None)
            return {gpu: seconds / alone_s.iteration_time_s for gpu, seconds in busy.items()}
        costs = self._plan(model, batch_size, plan)
        alone = self._alone_costs((model, batch_size, plan.depths, placement), costs, placement)
        return {gpu: busy / alone.iteration_s for gpu, busy in alone.place.gpu_busy_s}

    def nic_loads(
        self, model: str, batch_size: int, plan: Plan, placement: Placement
    ) -> dict[int, float]:
        """Share of each node's NIC time this job keeps busy when it runs alone (not modelled
        for pipeline and hybrid plans: empty)."""
        if not isinstance(plan, SPBPlan):
            return {}
        costs = self._plan(model, batch_size, plan)
        alone = self._alone_costs((model, batch_size, plan.depths, placement), costs, placement)
        return {node: busy / alone.iteration_s for node, busy in alone.place.nic_busy_s}

    def timing(self, model: str, batch_size: int, plan: Plan, placement: Placement) -> GangTiming:
        """Iteration time alone, compute seconds per GPU and the job's sharing profile: what
        the co-location model needs (:mod:`jigsaw.oracle.colocation`)."""
        if not isinstance(plan, SPBPlan):
            busy = self._parallel_busy(model, batch_size, plan, placement)
            alone_p = self._predict_parallel(model, batch_size, plan, placement, None)
            return GangTiming(
                alone_p.iteration_time_s,
                tuple(busy.items()),
                self.sharing_profile(model, batch_size),
            )
        alone_s = self.predict(model, batch_size, plan, placement).iteration_time_s
        costs = self._plan(model, batch_size, plan)
        alone = self._alone_costs((model, batch_size, plan.depths, placement), costs, placement)
        return GangTiming(alone_s, alone.place.gpu_busy_s, self.sharing_profile(model, batch_size))

    def sharing_profile(self, model: str, batch_size: int) -> SharingProfile:
        """What concurrent sharing is predicted from
        (:func:`jigsaw.oracle.colocation_concurrent.sharing_profile`)."""
        key = (model, batch_size)
        found = self._sharing.get(key)
        if found is None:
            found = sharing_profile(self.profiles.get(model), batch_size, self.hardware)
            self._sharing[key] = found
        return found

    def worker_memory_bytes(self, model: str, batch_size: int, plan: Plan, rank: int) -> int:
        if not isinstance(plan, SPBPlan):
            return self.predict_plan_type(model, batch_size, plan).per_worker_memory_bytes[rank]
        return self._plan(model, batch_size, plan).memory_bytes[rank]

    def full_rate(self, model: str, batch_size: int, num_workers: int, gpus_per_node: int) -> float:
        """Iterations per second of full backprop on a compact placement, alone."""
        if gpus_per_node < 1:
            raise InvalidSpecError("gpus_per_node must be >= 1", field="gpus_per_node")
        plan = full_backprop(num_workers, self.num_blocks(model))
        placement = self.compact(num_workers, gpus_per_node)
        return 1.0 / self.predict(model, batch_size, plan, placement).iteration_time_s

    def eta(self, model: str, plan: Plan) -> float:
        if not isinstance(plan, SPBPlan):
            return 1.0
        return self.efficiency.lookup(model, plan).eta

    def goodput(
        self,
        model: str,
        batch_size: int,
        plan: Plan,
        placement: Placement,
        gpu_load: Mapping[GpuId, float] | None = None,
        nic_load: Mapping[int, float] | None = None,
    ) -> float:
        """Iterations per second x eta: full-backprop-equivalent progress per second."""
        prediction = self.predict(model, batch_size, plan, placement, gpu_load, nic_load)
        return self.eta(model, plan) / prediction.iteration_time_s

    def compact(self, num_workers: int, gpus_per_node: int | None = None) -> Placement:
        """Workers fill node 0 first, then node 1, ... one worker per GPU."""
        per_node = gpus_per_node if gpus_per_node is not None else self.hardware.gpus_per_node
        return tuple((rank // per_node, rank % per_node) for rank in range(num_workers))

    def predict_plan_type(
        self, model: str, batch_size: int, plan: PipelinePlan | HybridPlan
    ) -> PlanPrediction:
        """A pipeline or hybrid plan alone on a compact placement (:mod:`.plan_predictions`).
        ``batch_size`` is the job's per-worker batch; a pipeline replica takes
        :func:`~jigsaw.oracle.plan_predictions.replica_batch` of it, so the global batch is the
        same under every plan type."""
        key = (model, batch_size, plan)
        cached = self._parallel.get(key)
        if cached is not None:
            return cached
        profile = self.profiles.get(model)
        parallel = parallel_profile_of(profile)
        if parallel is None:
            raise InvalidSpecError(
                f"model {model!r} has no block output sizes in its profile: only data "
                "parallelism can be predicted for it",
                field="parallelism",
            )
        prediction = predict_plan(parallel, self.hardware, plan, replica_batch(plan, batch_size))
        self._parallel[key] = prediction
        return prediction

    # ----------------------------------------------------------------- internals

    def _parallel_busy(
        self, model: str, batch_size: int, plan: PipelinePlan | HybridPlan, placement: Placement
    ) -> dict[GpuId, float]:
        parallel = self.predict_plan_type(model, batch_size, plan)
        if len(placement) != plan.num_workers:
            raise InvalidSpecError(
                f"placement names {len(placement)} GPUs but the plan has "
                f"{plan.num_workers} workers",
                field="placement",
            )
        busy: dict[GpuId, float] = {}
        for gpu, seconds in zip(placement, parallel.per_worker_compute_s, strict=True):
            busy[gpu] = busy.get(gpu, 0.0) + seconds
        return busy

    def _predict_parallel(
        self,
        model: str,
        batch_size: int,
        plan: PipelinePlan | HybridPlan,
        placement: Placement,
        gpu_load: Mapping[GpuId, float] | None,
    ) -> Prediction:
        parallel = self.predict_plan_type(model, batch_size, plan)
        busy = self._parallel_busy(model, batch_size, plan, placement)
        alone = max(parallel.iteration_time_s, max(busy.values()))
        stretch = 1.0
        for gpu, seconds in busy.items():
            load = seconds / alone + (gpu_load.get(gpu, 0.0) if gpu_load else 0.0)
            stretch = max(stretch, load)
        return Prediction(
            per_worker_compute_s=tuple(c * stretch for c in parallel.per_worker_compute_s),
            per_worker_memory_bytes=parallel.per_worker_memory_bytes,
            per_worker_bytes_sent=parallel.per_worker_bytes_sent,
            communication_s=parallel.communication_s,
            iteration_time_s=alone * stretch,
            source=self.profiles.get(model).source,
        )

    def _plan(self, model: str, batch_size: int, plan: SPBPlan) -> PlanCosts:
        key = (model, batch_size, plan.depths)
        costs = self._plans.get(key)
        if costs is not None:
            return costs
        per_model = self._models.get((model, batch_size))
        if per_model is None:
            if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
                raise InvalidSpecError(
                    f"batch size must be a positive integer, got {batch_size!r}",
                    field="batch_size",
                )
            profile = self.profiles.get(model)
            per_model = (model_costs(profile, batch_size, self.hardware), profile.source)
            self._models[(model, batch_size)] = per_model
        if plan.num_blocks != per_model[0].num_blocks:
            raise InvalidPlanError(
                f"plan is for {plan.num_blocks} blocks but model {model!r} has "
                f"{per_model[0].num_blocks}"
            )
        costs = plan_costs(per_model[0], plan.depths)
        self._plans[key] = costs
        return costs

    def _alone_costs(
        self,
        key: tuple[str, int, tuple[int, ...], Placement],
        costs: PlanCosts,
        placement: Placement,
    ) -> _Alone:
        alone = self._alone.get(key)
        if alone is not None:
            return alone
        if len(placement) != len(costs.compute_s):
            raise InvalidSpecError(
                f"placement names {len(placement)} GPUs but the plan has "
                f"{len(costs.compute_s)} workers",
                field="placement",
            )
        place = placement_costs(costs, placement, self.hardware)
        compute = max(busy for _, busy in place.gpu_busy_s)
        straggle = 1.0 + self.hardware.node_straggler_fraction * (place.gpus_on_busiest_node - 1)
        iteration = compute * straggle + self._exposed(place.comm_s, compute)
        alone = _Alone(place, compute, iteration)
        if len(self._alone) >= _MAX_PLACEMENT_CACHE:
            self._alone.clear()
            self._predictions.clear()
        self._alone[key] = alone
        return alone

    def _exposed(self, comm: float, compute: float) -> float:
        """Communication time not hidden behind compute (calibrated soft max)."""
        if comm <= 0.0:
            return 0.0
        hw = self.hardware
        hideable = (1.0 - hw.unhidden_tail_fraction) * comm
        width = hw.overlap_smoothness * hideable
        x = hideable - hw.overlap_fraction * compute
        if width <= 0.0:
            return hw.unhidden_tail_fraction * comm + max(x, 0.0)
        z = x / width
        soft = width * (max(z, 0.0) + math.log1p(math.exp(-abs(z))))
        return hw.unhidden_tail_fraction * comm + soft
