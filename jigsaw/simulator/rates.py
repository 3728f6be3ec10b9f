"""Rate models for the simulated executor, backed by the oracle (or by Gavel's table).

``rate`` is goodput: iterations per second times eta of the plan, slowed by whatever other
jobs load the same GPUs (``other_load``). ``reference_rate`` is the speed the same job would
have alone, full backprop, on a compact placement: the yardstick for "useful" work.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from jigsaw.efficiency.table import EfficiencyTable, EtaEstimate
from jigsaw.model.cluster import GpuId, Placement
from jigsaw.model.domain import Job
from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.numerics import ROUNDOFF
from jigsaw.model.plan import Plan, SPBPlan
from jigsaw.oracle import GangTiming, Oracle
from jigsaw.simulator.rate_model import RateModel
from jigsaw.traces import GavelThroughputs


class ReferenceRate(RateModel, Protocol):
    def reference_rate(self, job: Job) -> float:
        """Iterations per second alone, full backprop, compact: what 'useful' is measured in."""
        ...


@dataclass(frozen=True, slots=True)
class OverheadModel:
    """Seconds a gang is booked on its GPUs without making progress."""

    launch_s: float = 0.0
    """First start: the trace's run times already include it."""
    restart_s: float = 30.0
    """Resume after preemption, or migration: save a checkpoint, relaunch, restore."""
    replan_s: float = 1.0
    """New SPB plan on the same GPUs: taken at a lease boundary, no relaunch."""

    def __post_init__(self) -> None:
        if min(self.launch_s, self.restart_s, self.replan_s) < 0:
            raise ValueError("overheads must be >= 0 seconds")


class OracleRate:
    """Gangs progress at the oracle's goodput, with co-location slow-down."""

    def __init__(self, oracle: Oracle, gpus_per_node: int) -> None:
        self.oracle = oracle
        self.gpus_per_node = gpus_per_node
        self.colocation = oracle.colocation
        self._reference: dict[tuple[str, int, int], float] = {}

    def rate(
        self,
        job: Job,
        placement: Placement,
        plan: Plan,
        other_load: Mapping[GpuId, float],
    ) -> float:
        contended = {gpu: load for gpu, load in other_load.items() if load > ROUNDOFF}
        return self.oracle.goodput(
            job.spec.model,
            job.spec.batch_size,
            plan,
            placement,
            gpu_load=contended or None,
        )

    def load(self, job: Job, placement: Placement, plan: Plan) -> dict[GpuId, float]:
        return self.oracle.gpu_loads(job.spec.model, job.spec.batch_size, plan, placement)

    def startup_s(self, job: Job) -> float:
        del job
        return 0.0

    def timing(self, job: Job, placement: Placement, plan: Plan) -> GangTiming | None:
        try:
            return self.oracle.timing(job.spec.model, job.spec.batch_size, plan, placement)
        except InvalidSpecError:
            return None

    def rate_at(self, job: Job, plan: Plan, iteration_s: float) -> float:
        return self.oracle.eta(job.spec.model, plan) / iteration_s

    def reference_rate(self, job: Job) -> float:
        key = (job.spec.model, job.spec.batch_size, job.spec.workers)
        rate = self._reference.get(key)
        if rate is None:
            rate = self._reference[key] = self.oracle.full_rate(*key, self.gpus_per_node)
        return rate


class GavelRate:
    """Gavel's measured steps/s for the job type alone, scaled by the oracle's relative
    effects (eta of the plan, co-location and placement slow-down)."""

    def __init__(
        self,
        throughputs: GavelThroughputs,
        worker_type: str,
        job_types: Mapping[str, str],
        oracle_rate: OracleRate,
        round_s: float | None = None,
    ) -> None:
        if worker_type not in throughputs.worker_types():
            raise InvalidSpecError(
                f"worker type {worker_type!r} is not in the throughputs file; "
                f"choose one of: {', '.join(throughputs.worker_types())}",
                field="worker_type",
            )
        self.throughputs = throughputs
        self.worker_type = worker_type
        self.job_types = dict(job_types)
        self.oracle_rate = oracle_rate
        self.colocation = oracle_rate.colocation
        self.round_s = round_s
        """Gavel's rounds run whole steps: ``floor(rate x round_s)`` a round, so a job ends
        with a short last round for the steps left over (None: progress is continuous)."""

    def reference_rate(self, job: Job) -> float:
        job_type = self.job_types[job.id]
        return self.throughputs.steps_per_second(self.worker_type, job_type, job.spec.workers)

    def _round_rate(self, job: Job) -> float:
        rate = self.reference_rate(job)
        if self.round_s is None:
            return rate
        return max(math.floor(rate * self.round_s), 1) / self.round_s

    def rate(
        self,
        job: Job,
        placement: Placement,
        plan: Plan,
        other_load: Mapping[GpuId, float],
    ) -> float:
        relative = self.oracle_rate.rate(job, placement, plan, other_load) / (
            self.oracle_rate.reference_rate(job)
        )
        return self._round_rate(job) * relative

    def load(self, job: Job, placement: Placement, plan: Plan) -> dict[GpuId, float]:
        return self.oracle_rate.load(job, placement, plan)

    def timing(self, job: Job, placement: Placement, plan: Plan) -> GangTiming | None:
        return self.oracle_rate.timing(job, placement, plan)

    def rate_at(self, job: Job, plan: Plan, iteration_s: float) -> float:
        relative = self.oracle_rate.rate_at(job, plan, iteration_s) / (
            self.oracle_rate.reference_rate(job)
        )
        return self._round_rate(job) * relative

    def startup_s(self, job: Job) -> float:
        del job
        return 0.0


class UnitEfficiency(EfficiencyTable):
    """Ablation: every SPB plan makes as much progress per iteration as full backprop."""

    def __init__(self) -> None:
        super().__init__(origin="ablation: eta = 1 for every plan")

    def lookup(self, model: str, plan: SPBPlan) -> EtaEstimate:
        del model, plan
        return EtaEstimate(1.0, "ablation: eta = 1")
