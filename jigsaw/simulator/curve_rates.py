"""A rate model whose eta follows the job's application curve over training (docs/SCHEDULER.md,
"eta over training").

:func:`with_curve_eta` wraps a rate model: the gang's rate is the inner model's rate with the
inner eta (``base_eta``: the oracle's table for :class:`~jigsaw.simulator.rates.OracleRate`,
and :meth:`PolluxRate.eta <jigsaw.simulator.pollux_rate.PolluxRate.eta>`, the same table, for
Pollux's measured rates) replaced by the curve's. The executor
asks for a rate whenever a gang is (re)rated: at its start, re-plan, resume, and when a
neighbour on a shared GPU starts or stops. The eta used is the harmonic mean of the curve's eta
over the progress the job still has to make, from the progress at its start (or re-plan): a
gang that runs to the end undisturbed finishes exactly when the curve says; progress read
mid-way is a straight line instead of the curve.

:func:`philly_app` is the documented rule that gives each Philly job an application.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import cast

from jigsaw.efficiency.model import DEFAULT_MIN_OBSERVATIONS
from jigsaw.model.block_noise import BlockNoise
from jigsaw.model.cluster import GpuId, Placement
from jigsaw.model.domain import Job
from jigsaw.model.plan import Plan, SPBPlan
from jigsaw.oracle import ColocationModel, GangTiming
from jigsaw.simulator.eta_curves import CurveEta
from jigsaw.simulator.rate_model import TimeSlicedRates
from jigsaw.simulator.rates import ReferenceRate
from jigsaw.traces import TraceJob

BaseEta = Callable[[Job, Plan], float]

PHILLY_APPS: dict[tuple[str, str], tuple[str, ...]] = {
    ("single", "short"): ("ncf", "cifar10"),
    ("single", "long"): ("cifar10", "deepspeech2"),
    ("few", "short"): ("cifar10", "yolov3"),
    ("few", "long"): ("deepspeech2", "yolov3"),
    ("many", "short"): ("bert", "imagenet"),
    ("many", "long"): ("imagenet", "bert"),
}
"""Philly job -> application: bucket by GPUs (1: ``single``, 2-4: ``few``, more: ``many``) and
run time (under 1 hour: ``short``), then pick one of the bucket's two applications with a
seeded hash of the job id (the same seed and job always give the same application)."""
SHORT_S = 3600.0


def philly_app(job: TraceJob, seed: int) -> str:
    size = "single" if job.num_workers <= 1 else "few" if job.num_workers <= 4 else "many"
    length = "short" if (job.duration_s or 0.0) < SHORT_S else "long"
    choices = PHILLY_APPS[(size, length)]
    return choices[zlib.crc32(f"{seed}:{job.id}".encode()) % len(choices)]


@dataclass
class CurveEtaRate:
    inner: ReferenceRate
    curves: CurveEta
    app_of: Mapping[str, str]
    """job id -> application."""
    base_eta: BaseEta

    eta_source = "curve"

    def factor(self, job: Job, plan: Plan) -> float:
        """curve eta / inner eta for the gang from the job's progress to its end."""
        if not isinstance(plan, SPBPlan) or plan.is_full_backprop:
            return 1.0
        app = self.app_of[job.id]
        progress = job.iterations_done / job.spec.iterations if job.spec.iterations else 0.0
        curve = self.curves.mean_eta(app, plan, job.spec.batch_size, progress)
        base = self.base_eta(job, plan)
        return curve / base if base > 0 else curve

    def rate(
        self, job: Job, placement: Placement, plan: Plan, other_load: Mapping[GpuId, float]
    ) -> float:
        return self.inner.rate(job, placement, plan, other_load) * self.factor(job, plan)

    def noise_report(
        self, job: Job, plan: Plan, done: float
    ) -> tuple[int, tuple[BlockNoise, ...]] | None:
        """What a gang's workers would report at ``done`` iterations: the per-block gradient
        statistics of its application's curve there, as a lease outcome's ``block_noise``,
        with the stretch of the curve they come from (a new report is due only when it
        changes). None for a one-worker gang (no SPB plan to price) or a job without an
        application."""
        app = self.app_of.get(job.id)
        if app is None or plan.num_workers < 2 or not job.spec.iterations:
            return None
        workers, batch = plan.num_workers, job.spec.batch_size
        progress = done / job.spec.iterations
        stats = self.curves.block_noise(
            app,
            plan.num_blocks,
            workers,
            batch,
            progress,
            iteration=int(done),
            observations=DEFAULT_MIN_OBSERVATIONS,
        )
        segment = self.curves.segment_index(app, workers, batch, progress)
        return segment, tuple(stats)

    def load(self, job: Job, placement: Placement, plan: Plan) -> dict[GpuId, float]:
        return self.inner.load(job, placement, plan)

    def progress_curve(
        self, job: Job, placement: Placement, plan: Plan
    ) -> Callable[[float], float] | None:
        """The inner model's curve (an elastic Pollux gang's speed changes by epoch): eta
        scales the whole rate, so where the gang stands on the way is the inner's."""
        curved = getattr(self.inner, "progress_curve", None)
        if not callable(curved):
            return None
        found: Callable[[float], float] | None = curved(job, placement, plan)
        return found

    def startup_s(self, job: Job) -> float:
        return self.inner.startup_s(job)

    def reference_rate(self, job: Job) -> float:
        return self.inner.reference_rate(job)


@dataclass
class CurveEtaSlicedRate(CurveEtaRate):
    """The same, for an inner model with the time-slicing hooks (``timing``, ``rate_at``)."""

    def timing(self, job: Job, placement: Placement, plan: Plan) -> GangTiming | None:
        return cast(TimeSlicedRates, self.inner).timing(job, placement, plan)

    @property
    def colocation(self) -> ColocationModel | None:
        """The inner model's co-location model (the executor re-times shared GPUs with it)."""
        found: ColocationModel | None = getattr(self.inner, "colocation", None)
        return found

    def rate_at(self, job: Job, plan: Plan, iteration_s: float) -> float:
        rate = cast(TimeSlicedRates, self.inner).rate_at(job, plan, iteration_s)
        return rate * self.factor(job, plan)


def with_curve_eta(
    inner: ReferenceRate, curves: CurveEta, app_of: Mapping[str, str], base_eta: BaseEta
) -> CurveEtaRate:
    sliced = callable(getattr(inner, "timing", None)) and callable(getattr(inner, "rate_at", None))
    kind = CurveEtaSlicedRate if sliced else CurveEtaRate
    return kind(inner, curves, dict(app_of), base_eta)
