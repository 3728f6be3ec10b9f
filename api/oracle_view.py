"""The oracle as the service uses it: predictions for ``jobs:validate``, worker loads for the
packing view and rates for queue ETAs. Block counts come from the model catalog.

Models without a profile (``package.mod:fn`` entry points) still work: their K is unknown
until their first lease reports it, they run full backprop until then, they get the
configured fallback rate, and every answer says so in its ``source``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from jigsaw.catalog import ModelCatalog
from jigsaw.cluster import Placement
from jigsaw.domain import JobSpec
from jigsaw.environment import worker_memory_limit_bytes
from jigsaw.errors import InvalidSpecError
from jigsaw.hardware import PRESET_NAMES, preset
from jigsaw.oracle import Oracle, SharingSettings
from jigsaw.oracle.plan_choice import PlanChoice, PlanTypeChooser
from jigsaw.plan import Plan, full_backprop
from jigsaw.policies.plan_resolution import configure_plan_types

log = logging.getLogger(__name__)

FALLBACK_HARDWARE = "v100"


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
        gpu_type: str,
        gpus_per_node: int,
        fallback_rate: float,
        *,
        simulated_rate: float | None = None,
        worker_memory_gib: float | None = None,
        sharing: SharingSettings | None = None,
    ) -> None:
        hardware = gpu_type if gpu_type in PRESET_NAMES else FALLBACK_HARDWARE
        self.hardware_note = "" if hardware == gpu_type else f" (priced as {hardware})"
        self._oracle = Oracle(preset(hardware), sharing=sharing)
        self._gpus_per_node = gpus_per_node
        self.fallback_rate = fallback_rate
        self.simulated_rate = simulated_rate
        """Set when the executor is the constant-rate simulator: every job runs at it."""
        self.catalog = ModelCatalog(self._oracle.profiles)
        self.plan_types = PlanTypeChooser(
            self._oracle.hardware,
            self._oracle.profiles,
            worker_memory_limit_bytes(worker_memory_gib),
        )
        # The service's policies resolve plan types with the same chooser as its answers.
        configure_plan_types(self.plan_types)

    @property
    def oracle(self) -> Oracle:
        return self._oracle

    def known(self, model: str) -> bool:
        return self.catalog.has_profile(model)

    def num_blocks(self, model: str) -> int | None:
        """K from the catalog; ``None`` for a model whose workers have not reported it."""
        return self.catalog.num_blocks(model)

    def plan_choice(self, spec: JobSpec) -> PlanChoice | None:
        """The plan-type choice for ``spec`` (every alternative predicted); ``None`` for a
        model without a profile. Raises naming ``parallelism`` when nothing allowed fits."""
        return self.plan_types.choice(spec)

    def plan_for(self, spec: JobSpec) -> Plan:
        """The plan a gang policy would start ``spec`` with (full backprop while K is
        unknown: the workers resolve the request against the model they build)."""
        typed = self.plan_types.plan_for(spec)
        if typed is not None:
            return typed
        blocks = self.num_blocks(spec.model)
        if blocks is None:
            return full_backprop(spec.workers, 1)
        return spec.plan_request.resolve(spec.workers, blocks)

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
        return PredictionView(
            prediction.iteration_time_s,
            list(prediction.per_worker_memory_bytes),
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
        except (InvalidSpecError, ValueError, KeyError) as error:
            log.debug("no worker estimate for %s rank %s: %s", spec.name, rank, error)
            return WorkerEstimate(None, None)
        return WorkerEstimate(load, memory)

    def rate(self, spec: JobSpec, plan: Plan | None) -> float:
        """Iterations per second the job should reach alone on a compact placement."""
        if self.simulated_rate is not None:
            return self.simulated_rate
        if not self.known(spec.model):
            return self.fallback_rate
        try:
            chosen = plan if plan is not None else self.plan_for(spec)
            placement = self._oracle.compact(spec.workers, self._gpus_per_node)
            seconds = self._oracle.predict(
                spec.model, spec.batch_size, chosen, placement
            ).iteration_time_s
        except (InvalidSpecError, ValueError, KeyError):
            return self.fallback_rate
        return 1.0 / seconds if seconds > 0 else self.fallback_rate
