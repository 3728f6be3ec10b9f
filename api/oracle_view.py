"""The oracle as the service uses it: predictions for ``jobs:validate``, worker loads for the
packing view and rates for queue ETAs. Plans, plan types and block counts come from the
service's one :class:`~jigsaw.planning.planner.Planner` (:func:`build_planner`, held on the app
state).

Models without a profile (``package.mod:fn`` entry points) still work: their K is unknown
until their first lease reports it, they run full backprop until then, they get the
configured fallback rate, and every answer says so in its ``source``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from api.settings import Settings
from jigsaw.model.cluster import Placement
from jigsaw.model.domain import JobSpec
from jigsaw.model.environment import worker_memory_limit_bytes
from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.plan import Plan
from jigsaw.oracle import Oracle, SharingSettings
from jigsaw.planning.catalog import ModelCatalog
from jigsaw.planning.optimizer_plans import extra_state_bytes
from jigsaw.planning.planner import Planner

log = logging.getLogger(__name__)


def build_planner(gpu_type: str, worker_memory_gib: float | None) -> Planner:
    """The service's planner: its GPU type (``JIGSAW_GPU_TYPE``; one the oracle has no preset
    for is planned as the default type) and per-worker limit (``JIGSAW_WORKER_MEMORY_GIB``)."""
    return Planner.for_gpu_type(
        gpu_type,
        memory_limit_bytes=worker_memory_limit_bytes(worker_memory_gib),
        catalog=ModelCatalog(),
    )


def oracle_view_for(settings: Settings, planner: Planner | None = None) -> OracleView:
    """The service's one oracle view, from its settings (the API, the scheduler process and
    the simulated executor build it alike); ``planner`` shares one already built."""
    return OracleView(
        planner
        if planner is not None
        else build_planner(settings.gpu_type, settings.worker_memory_gib),
        settings.gpus_per_node,
        settings.sim_iterations_per_second,
        gpu_type=settings.gpu_type,
        simulated_rate=(
            settings.sim_iterations_per_second if settings.executor == "simulated" else None
        ),
        sharing=settings.sharing_settings,
    )


@dataclass(frozen=True, slots=True)
class PredictionView:
    iteration_time_s: float | None
    per_worker_memory_bytes: list[int]
    per_worker_compute_s: list[float]
    per_worker_bytes_sent: list[int]
    source: str


@dataclass(frozen=True, slots=True)
class WorkerEstimate:
    load: float | None
    memory_bytes: int | None


class OracleView:
    def __init__(
        self,
        planner: Planner,
        gpus_per_node: int,
        fallback_rate: float,
        *,
        gpu_type: str | None = None,
        simulated_rate: float | None = None,
        sharing: SharingSettings | None = None,
    ) -> None:
        self.planner = planner
        """The service's one planner: its policies, its submission checks and this view."""
        priced = planner.priced_as
        self.hardware_note = "" if gpu_type in (None, priced) else f" (priced as {priced})"
        self._oracle = Oracle(planner.hardware, profiles=planner.catalog.profiles, sharing=sharing)
        self._gpus_per_node = gpus_per_node
        self.fallback_rate = fallback_rate
        self.simulated_rate = simulated_rate
        """Set when the executor is the constant-rate simulator: every job runs at it."""
        self.catalog = planner.catalog

    @property
    def oracle(self) -> Oracle:
        return self._oracle

    def known(self, model: str) -> bool:
        return self.catalog.has_profile(model)

    def num_blocks(self, model: str) -> int | None:
        """K from the catalog; ``None`` for a model whose workers have not reported it."""
        return self.catalog.num_blocks(model)

    def predict(self, spec: JobSpec, plan: Plan) -> PredictionView:
        if not self.known(spec.model):
            return PredictionView(
                None,
                [],
                [],
                [],
                f"no oracle profile for model {spec.model!r}: nothing predicted; its block "
                "count is reported by its first lease",
            )
        placement = self._oracle.compact(spec.workers, self._gpus_per_node)
        prediction = self._oracle.predict(spec.model, spec.batch_size, plan, placement)
        extra = self._optimizer_bytes(spec)
        return PredictionView(
            prediction.iteration_time_s,
            [memory + extra for memory in prediction.per_worker_memory_bytes],
            list(prediction.per_worker_compute_s),
            list(prediction.per_worker_bytes_sent),
            f"oracle ({prediction.source} profile){self.hardware_note}, compact placement",
        )

    def worker(
        self, spec: JobSpec, plan: Plan | None, rank: int, placement: Placement
    ) -> WorkerEstimate:
        if plan is None or not self.known(spec.model):
            return WorkerEstimate(None, None)
        try:
            load = self._oracle.worker_load(spec.model, spec.batch_size, plan, rank, placement)
            memory = self._oracle.worker_memory_bytes(spec.model, spec.batch_size, plan, rank)
            memory += self._optimizer_bytes(spec)
        except (InvalidSpecError, ValueError, KeyError) as error:
            log.debug("no worker estimate for %s rank %s: %s", spec.name, rank, error)
            return WorkerEstimate(None, None)
        return WorkerEstimate(load, memory)

    def _optimizer_bytes(self, spec: JobSpec) -> int:
        """AdamW's second moment, which the oracle's per-rank figures (SGD's state) leave
        out; an ``adamw`` job is always data parallel, each worker holding every parameter."""
        entry = self.catalog.find(spec.model)
        if spec.optimizer == "sgd" or entry is None or entry.profile is None:
            return 0
        return extra_state_bytes(entry.profile.param_bytes, spec.optimizer)

    def rate(self, spec: JobSpec, plan: Plan | None) -> float:
        """Iterations per second the job should reach alone on a compact placement."""
        if self.simulated_rate is not None:
            return self.simulated_rate
        if not self.known(spec.model):
            return self.fallback_rate
        try:
            chosen = plan if plan is not None else self.planner.spec_plan(spec)
            placement = self._oracle.compact(spec.workers, self._gpus_per_node)
            seconds = self._oracle.predict(
                spec.model, spec.batch_size, chosen, placement
            ).iteration_time_s
        except (InvalidSpecError, ValueError, KeyError):
            return self.fallback_rate
        return 1.0 / seconds if seconds > 0 else self.fallback_rate
