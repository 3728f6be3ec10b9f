"""The oracle as the service uses it: block counts, predictions for ``jobs:validate``, worker
loads for the packing view and rates for queue ETAs.

Models the oracle has no profile for (``package.mod:fn`` entry points) still work: they get
``FALLBACK_BLOCKS`` blocks and the constant rate of the simulated executor, and every answer
says so in its ``source``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from jigsaw.cluster import Placement
from jigsaw.domain import JobSpec
from jigsaw.errors import InvalidSpecError
from jigsaw.hardware import PRESET_NAMES, preset
from jigsaw.oracle import Oracle
from jigsaw.plan import SPBPlan, resolve_plan

log = logging.getLogger(__name__)

FALLBACK_BLOCKS = 4
"""Blocks assumed for a model without a profile (the same default FIFO uses)."""
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
    ) -> None:
        hardware = gpu_type if gpu_type in PRESET_NAMES else FALLBACK_HARDWARE
        self.hardware_note = "" if hardware == gpu_type else f" (priced as {hardware})"
        self._oracle = Oracle(preset(hardware))
        self._gpus_per_node = gpus_per_node
        self.fallback_rate = fallback_rate
        self.simulated_rate = simulated_rate
        """Set when the executor is the constant-rate simulator: every job runs at it."""
        self._blocks: dict[str, int | None] = {}

    @property
    def oracle(self) -> Oracle:
        return self._oracle

    def known(self, model: str) -> bool:
        return self._profile_blocks(model) is not None

    def num_blocks(self, model: str) -> int:
        blocks = self._profile_blocks(model)
        return blocks if blocks is not None else FALLBACK_BLOCKS

    def plan_for(self, spec: JobSpec) -> SPBPlan:
        return resolve_plan(spec.spb, spec.workers, self.num_blocks(spec.model))

    def predict(self, spec: JobSpec, plan: SPBPlan) -> PredictionView:
        if not self.known(spec.model):
            return PredictionView(
                None,
                [],
                [],
                [],
                f"no oracle profile for model {spec.model!r}: nothing predicted; the scheduler "
                f"assumes {FALLBACK_BLOCKS} blocks",
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
        self, spec: JobSpec, plan: tuple[int, ...], rank: int, placement: Placement
    ) -> WorkerEstimate:
        if not plan or not self.known(spec.model):
            return WorkerEstimate(None, None)
        try:
            depths = SPBPlan(plan, self.num_blocks(spec.model))
            load = self._oracle.worker_load(spec.model, spec.batch_size, depths, rank, placement)
            memory = self._oracle.worker_memory_bytes(spec.model, spec.batch_size, depths, rank)
        except (InvalidSpecError, ValueError, KeyError) as error:
            log.debug("no worker estimate for %s rank %s: %s", spec.name, rank, error)
            return WorkerEstimate(None, None)
        return WorkerEstimate(load, memory)

    def rate(self, spec: JobSpec, plan: tuple[int, ...]) -> float:
        """Iterations per second the job should reach alone on a compact placement."""
        if self.simulated_rate is not None:
            return self.simulated_rate
        if not self.known(spec.model):
            return self.fallback_rate
        try:
            depths = SPBPlan(plan, self.num_blocks(spec.model)) if plan else self.plan_for(spec)
            placement = self._oracle.compact(spec.workers, self._gpus_per_node)
            seconds = self._oracle.predict(
                spec.model, spec.batch_size, depths, placement
            ).iteration_time_s
        except (InvalidSpecError, ValueError, KeyError):
            return self.fallback_rate
        return 1.0 / seconds if seconds > 0 else self.fallback_rate

    def _profile_blocks(self, model: str) -> int | None:
        if model not in self._blocks:
            if len(self._blocks) > 10_000:  # model names come from users: keep it bounded
                self._blocks.clear()
            try:
                self._blocks[model] = self._oracle.num_blocks(model)
            except (InvalidSpecError, OSError):  # OSError: a name too long for a file name
                self._blocks[model] = None
        return self._blocks[model]
