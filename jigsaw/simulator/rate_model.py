"""What the simulated executor asks of a rate model: the :class:`RateModel` protocol, the
optional capabilities it looks for (:class:`CurvedProgress` for progress that is not linear
between re-ratings, :class:`TimeSlicedRates` for time-slicing on shared GPUs), and
:class:`ConstantRate`, the simplest rate model (for tests and the thin path)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from jigsaw.model.cluster import GpuId, Placement
from jigsaw.model.domain import Job
from jigsaw.model.plan import Plan
from jigsaw.oracle.gang_timing import GangTiming


class RateModel(Protocol):
    def rate(
        self,
        job: Job,
        placement: Placement,
        plan: Plan,
        other_load: Mapping[GpuId, float],
    ) -> float:
        """Effective progress in iterations per second (already multiplied by eta)."""
        ...

    def load(self, job: Job, placement: Placement, plan: Plan) -> dict[GpuId, float]:
        """Fraction of each GPU's time this gang keeps busy when it runs unhindered."""
        ...

    def startup_s(self, job: Job) -> float:
        """Time from launch (or resume from checkpoint) to the first iteration."""
        ...


ProgressCurve = Callable[[float], float]
"""Share of its remaining work a gang has done after a share of the time it needs for it
(monotone, 0 -> 0, 1 -> 1)."""


class CurvedProgress(Protocol):
    """A rate model whose gangs do not progress at a constant rate between re-ratings (an
    elastic Pollux job whose batch follows its epochs): ``rate`` still gives the mean rate
    to the end, which sets the finish time, and the curve says where the gang is on the way,
    so a resize or preemption checkpoints exactly where it stands."""

    def progress_curve(self, job: Job, placement: Placement, plan: Plan) -> ProgressCurve | None:
        """The curve from ``job.iterations_done`` on (``None``: linear)."""
        ...


class TimeSlicedRates(Protocol):
    """What a rate model offers for honest time-slicing on shared GPUs."""

    def timing(self, job: Job, placement: Placement, plan: Plan) -> GangTiming | None:
        """Iteration time alone and compute seconds per GPU (None: not known, e.g. a model
        without a profile; the gang is then rated by ``rate`` with the others' load)."""
        ...

    def rate_at(self, job: Job, plan: Plan, iteration_s: float) -> float:
        """Effective progress (iterations per second times eta) at this iteration time."""
        ...


@dataclass(frozen=True, slots=True)
class ConstantRate:
    """Every gang runs at a fixed rate and fills its GPUs; for tests and the thin path."""

    iterations_per_second: float = 10.0
    startup_seconds: float = 0.0

    def rate(
        self,
        job: Job,
        placement: Placement,
        plan: Plan,
        other_load: Mapping[GpuId, float],
    ) -> float:
        del job, plan
        slowdown = max((1.0 + other_load.get(gpu, 0.0) for gpu in placement), default=1.0)
        return self.iterations_per_second / slowdown

    def load(self, job: Job, placement: Placement, plan: Plan) -> dict[GpuId, float]:
        del job, plan
        return dict.fromkeys(placement, 1.0)

    def startup_s(self, job: Job) -> float:
        del job
        return self.startup_seconds
