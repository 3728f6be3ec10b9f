"""The simulated executor as the simulator uses it: overheads by kind of start (a resize costs
a restart, reported by the new gang's ``Started`` as on Ray), exact checkpoints at preemption
and resize, and a record of how many GPUs are busy over time."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from jigsaw.model.cluster import GpuId, Placement
from jigsaw.model.domain import Job
from jigsaw.model.executor_events import ExecutorEvent, Progressed
from jigsaw.model.lease_outcome import LeaseOutcome
from jigsaw.model.plan import Plan
from jigsaw.scheduling.seams import Clock
from jigsaw.simulator.rate_executor import RateDrivenExecutor
from jigsaw.simulator.rate_model import RateModel
from jigsaw.simulator.rates import OverheadModel


class _StartupByKind:
    """Wraps a RateModel so that ``startup_s`` depends on why the gang (re)starts."""

    def __init__(self, inner: RateModel, overheads: OverheadModel) -> None:
        self.inner = inner
        self.overheads = overheads
        self.kind = "launch"
        self.rate = inner.rate
        self.load = inner.load
        # Time-slicing on shared GPUs (jigsaw.simulator.rate_model.TimeSlicedRates), when
        # offered.
        self.timing = getattr(inner, "timing", None)
        self.rate_at = getattr(inner, "rate_at", None)
        # The co-location model the policy prices packing with, when offered.
        self.colocation = getattr(inner, "colocation", None)
        # Elastic gangs whose progress is not a straight line (CurvedProgress), when offered.
        self.progress_curve = getattr(inner, "progress_curve", None)

    def startup_s(self, job: Job) -> float:
        base = self.inner.startup_s(job)
        extra = {
            "launch": self.overheads.launch_s,
            "resume": self.overheads.restart_s,
            "migrate": self.overheads.restart_s,
            "replan": self.overheads.replan_s,
            "resize": self.overheads.restart_s,
        }[self.kind]
        return base + extra


class ReplayExecutor(RateDrivenExecutor):
    def __init__(
        self,
        rates: RateModel,
        overheads: OverheadModel,
        clock: Clock,
        on_busy_change: Callable[[float, int], None] | None = None,
    ) -> None:
        self._kinds = _StartupByKind(rates, overheads)
        super().__init__(self._kinds)
        self._clock = clock
        self._placements: dict[str, Placement] = {}
        self._gangs_on: dict[GpuId, int] = {}
        self._replanning: str | None = None
        self._on_busy_change = on_busy_change
        self.checkpoints: dict[str, float] = {}
        self._noise_report = getattr(rates, "noise_report", None)
        self._reported_segment: dict[str, int] = {}
        self._resize_checkpoints: dict[str, float] = {}
        """Progress at each resize's checkpoint, reported at the next poll as the workers'
        lease report would be (the store learns where a resized job restarted from)."""

    @property
    def reports_noise(self) -> bool:
        """The rate model can say what gradient statistics a gang would measure."""
        return callable(self._noise_report)

    @property
    def busy_gpus(self) -> int:
        return len(self._gangs_on)

    def start(self, job: Job, placement: Placement, plan: Plan) -> None:
        if self._replanning is not None:
            self._kinds.kind = self._replanning
        else:
            self._kinds.kind = "resume" if job.iterations_done > 0 else "launch"
        super().start(job, placement, plan)
        self._placements[job.id] = placement
        for gpu in set(placement):
            self._gangs_on[gpu] = self._gangs_on.get(gpu, 0) + 1
        self._busy_changed()

    def stop(self, job_id: str, *, checkpoint: bool) -> None:
        placement = self._placements.pop(job_id, None)
        if placement is None:
            return
        self._reported_segment.pop(job_id, None)
        if checkpoint:
            self.checkpoints[job_id] = self.progress(job_id, self._clock.now())
        super().stop(job_id, checkpoint=checkpoint)
        for gpu in set(placement):
            left = self._gangs_on[gpu] - 1
            if left:
                self._gangs_on[gpu] = left
            else:
                del self._gangs_on[gpu]
        self._busy_changed()

    def replan(self, job_id: str, placement: Placement, plan: Plan) -> None:
        self._replanning = "replan" if self._placements.get(job_id) == placement else "migrate"
        try:
            super().replan(job_id, placement, plan)
        finally:
            self._replanning = None
        # Only once the gang runs the new plan: a refused re-plan keeps a stopped job's
        # checkpoint.
        self.checkpoints.pop(job_id, None)

    def resize(self, job_id: str, placement: Placement, plan: Plan, worker_batch: int) -> None:
        self._replanning = "resize"
        try:
            super().resize(job_id, placement, plan, worker_batch)
        finally:
            self._replanning = None
        # Only once the new gang runs: a refused resize keeps a stopped job's checkpoint.
        self.checkpoints.pop(job_id, None)
        self._resize_checkpoints[job_id] = self._gangs[job_id].done
        # The new gang reports ``Started`` once its restart is charged, as a Ray gang does:
        # the cycle measures the resize's seconds from it, the cost the policy then prices.
        self._gangs[job_id].started_reported = False

    def poll(self, now: float) -> Sequence[ExecutorEvent]:
        events = super().poll(now)
        if not self._resize_checkpoints:
            return events
        reports = [
            Progressed(job_id, now, done)
            for job_id, done in sorted(self._resize_checkpoints.items())
            if job_id in self._gangs
        ]
        self._resize_checkpoints.clear()
        return [*events, *reports]

    def noise_reports(self, now: float) -> list[Progressed]:
        """Lease reports carrying the gradient statistics running gangs would have measured
        by ``now`` (one per gang each time its statistics change), for the cycle to fold in
        as the service folds in real workers' reports. Empty unless the rate model offers
        ``noise_report`` (curve eta)."""
        report_of = self._noise_report
        if not callable(report_of):
            return []
        events: list[Progressed] = []
        for job_id in sorted(self._placements):
            gang = self._gangs[job_id]
            if gang.plan.num_workers < 2 or not gang.started_reported:
                continue
            done = self.progress(job_id, now)
            if done <= gang.job.iterations_done:
                continue
            report = report_of(gang.job, gang.plan, done)
            if report is None or self._reported_segment.get(job_id) == report[0]:
                continue
            self._reported_segment[job_id] = report[0]
            outcome = LeaseOutcome().with_reported_noise(report[1])
            events.append(Progressed(job_id, now, done, outcome))
        return events

    def _busy_changed(self) -> None:
        if self._on_busy_change is not None:
            self._on_busy_change(self._clock.now(), len(self._gangs_on))
