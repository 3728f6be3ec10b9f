"""A simulated executor: gangs progress at the rate a RateModel predicts, in virtual time.

When the rate model can say how long a gang's iteration takes alone and how much of it each
GPU computes (:class:`TimeSlicedRates`), every group of gangs linked by shared GPUs is re-timed
together by the co-location model the rate model offers (``colocation``: the oracle's
:class:`~jigsaw.oracle.colocation.ColocationModel`, the one the policies price packing with;
time-slicing, :func:`jigsaw.oracle.timeslicing.timesliced_iteration_times`, when it offers
none); otherwise ``rate`` is given the other gangs' summed load on each GPU.

Progress is settled lazily: a running gang keeps (iterations at last settle, rate, settle
time), and finish times sit in a heap, so a poll costs O(finished + re-rated) rather than
O(running). A rate model whose gangs do not progress in a straight line between re-ratings
(:class:`CurvedProgress`: an elastic job whose speed changes by epoch) also gives a curve,
and such a gang is settled on it. Rates change only when a gang starts, stops or re-plans
next to a job sharing its GPUs, and then only for the jobs on those GPUs.
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from jigsaw.model.cluster import GpuId, Placement
from jigsaw.model.domain import Job, replace_job
from jigsaw.model.executor_events import ExecutorEvent, Finished, Progressed, Started
from jigsaw.model.numerics import TIME_EPS_S
from jigsaw.model.plan import Plan
from jigsaw.oracle.gang_timing import GangTiming
from jigsaw.oracle.timeslicing import timesliced_iteration_times
from jigsaw.scheduling.seams import ReplanRefused
from jigsaw.simulator.rate_model import (
    ConstantRate,
    CurvedProgress,
    ProgressCurve,
    RateModel,
    TimeSlicedRates,
)

# ConstantRate lives in jigsaw.simulator.rate_model; it is re-exported here for the many tests
# that build an executor with it.
__all__ = ["ConstantRate", "RateDrivenExecutor", "SharedTimes"]

SharedTimes = Callable[[Mapping[str, GangTiming]], dict[str, float]]
"""Iteration times of gangs sharing GPUs (``ColocationModel.iteration_times``)."""


@dataclass(slots=True)
class _Gang:
    job: Job
    placement: Placement
    plan: Plan
    done: float
    rate: float
    settled_at: float
    starts_at: float
    load: dict[GpuId, float]
    token: int = 0
    started_reported: bool = False
    timing: GangTiming | None = None
    timed: bool = False
    """``timing`` was asked of the rate model (it is, the first time the gang shares a GPU)."""
    guest_use: float = 0.0
    """GPUs' worth of compute this gang uses as a guest (time-sliced next to a larger gang)."""
    curve: ProgressCurve | None = None
    """Where the gang stands between re-ratings, when not on a straight line (curve_from)."""
    curve_from: tuple[float, float] = (0.0, 0.0)
    """(time, iterations done) where ``curve`` starts: the last re-rating."""


class RateDrivenExecutor:
    def __init__(self, rates: RateModel, *, report_progress: bool = False) -> None:
        self._rates = rates
        self._gangs: dict[str, _Gang] = {}
        self._gpu_load: dict[GpuId, float] = defaultdict(float)
        self._gpu_jobs: dict[GpuId, set[str]] = defaultdict(set)
        self._heap: list[tuple[float, int, str]] = []
        self._pending_starts: list[tuple[float, str]] = []
        self._report_progress = report_progress
        self._now = 0.0
        self._token = 0
        timing = getattr(rates, "timing", None)
        rate_at = getattr(rates, "rate_at", None)
        self._sliced: TimeSlicedRates | None = (
            rates if callable(timing) and callable(rate_at) else None  # type: ignore[assignment]
        )
        colocation = getattr(rates, "colocation", None)
        self._shared_times: SharedTimes = (
            colocation.iteration_times if colocation is not None else timesliced_iteration_times
        )
        curved = getattr(rates, "progress_curve", None)
        self._curved: CurvedProgress | None = rates if callable(curved) else None  # type: ignore[assignment]
        self.shared_gpu_seconds = 0.0
        """Integral over time of the number of GPUs holding two gangs or more."""
        self.guest_gpu_seconds = 0.0
        """Integral over time of the gangs beyond the first on each GPU (time-sliced GPU
        time: what ran in other gangs' slack)."""
        self.guest_compute_seconds = 0.0
        """GPU compute seconds guests used on shared GPUs: on each shared GPU, every gang
        but the largest counts ``busy / iteration time`` (time-slicing model only)."""
        self._shared_gpus = 0
        self._guests = 0
        self._guest_use = 0.0
        self._occupancy_at = 0.0

    # -- Executor seam ------------------------------------------------------------------
    def start(self, job: Job, placement: Placement, plan: Plan) -> None:
        begins = self._now + self._rates.startup_s(job)
        gang = _Gang(
            job,
            placement,
            plan,
            job.iterations_done,
            0.0,
            begins,
            begins,
            self._rates.load(job, placement, plan),
        )
        self._account_occupancy()
        self._gangs[job.id] = gang
        for gpu, share in gang.load.items():
            self._gpu_load[gpu] += share
            jobs = self._gpu_jobs[gpu]
            jobs.add(job.id)
            if len(jobs) == 2:
                self._shared_gpus += 1
            if len(jobs) >= 2:
                self._guests += 1
        heapq.heappush(self._pending_starts, (begins, job.id))
        self._rerate(self._neighbours(placement))

    def stop(self, job_id: str, *, checkpoint: bool) -> None:
        del checkpoint  # a simulated checkpoint is free; restart cost is in startup_s
        gang = self._gangs.pop(job_id, None)
        if gang is None:
            return
        self._account_occupancy()
        self._guest_use -= gang.guest_use
        gang.guest_use = 0.0
        for gpu, share in gang.load.items():
            self._gpu_load[gpu] -= share
            jobs = self._gpu_jobs[gpu]
            if len(jobs) >= 2:
                self._guests -= 1
            if len(jobs) == 2:
                self._shared_gpus -= 1
            jobs.discard(job_id)
        self._rerate(self._neighbours(gang.placement))

    def replan(self, job_id: str, placement: Placement, plan: Plan) -> None:
        gang = self._gangs.get(job_id)
        if gang is None:
            raise ReplanRefused(f"job {job_id} has no gang to re-plan (it ended or was stopped)")
        self.stop(job_id, checkpoint=True)
        self._settle(gang)
        self.start(replace_job(gang.job, iterations_done=gang.done), placement, plan)
        self._gangs[job_id].started_reported = gang.started_reported

    def resize(self, job_id: str, placement: Placement, plan: Plan, worker_batch: int) -> None:
        """Checkpoint where the gang is and restart it at the new size and batch; the restart
        costs ``startup_s`` again (the rate model sees the job's new ``worker_batch``).
        Raises :class:`ReplanRefused`, having changed nothing, when the job has no gang."""
        gang = self._gangs.get(job_id)
        if gang is None:
            raise ReplanRefused(f"job {job_id} has no gang to resize (it ended or was stopped)")
        self.stop(job_id, checkpoint=True)
        self._settle(gang)
        resumed = replace_job(gang.job, iterations_done=gang.done, worker_batch=worker_batch)
        self.start(resumed, placement, plan)
        self._gangs[job_id].started_reported = gang.started_reported

    def running_jobs(self) -> set[str]:
        return set(self._gangs)

    def gang_count(self) -> int:
        """``len(running_jobs())`` without the set (the replay asks after every event)."""
        return len(self._gangs)

    def poll(self, now: float) -> Sequence[ExecutorEvent]:
        self._now = now
        events: list[ExecutorEvent] = []
        while self._pending_starts and self._pending_starts[0][0] <= now + TIME_EPS_S:
            at, job_id = heapq.heappop(self._pending_starts)
            gang = self._gangs.get(job_id)
            if gang is not None and not gang.started_reported and gang.starts_at == at:
                gang.started_reported = True
                events.append(Started(job_id, at))
        while self._heap and self._heap[0][0] <= now + TIME_EPS_S:
            at, token, job_id = heapq.heappop(self._heap)
            gang = self._gangs.get(job_id)
            if gang is None or gang.token != token:
                continue
            self.stop(job_id, checkpoint=False)
            events.append(Finished(job_id, at, float(gang.job.spec.iterations)))
        if self._report_progress:
            for job_id, gang in sorted(self._gangs.items()):
                self._settle(gang)
                events.append(Progressed(job_id, now, gang.done))
        return events

    def next_event_time(self) -> float | None:
        heap, gangs = self._heap, self._gangs
        while heap:
            at, token, job_id = heap[0]
            gang = gangs.get(job_id)
            if gang is not None and gang.token == token:
                break
            heapq.heappop(heap)  # stale: the gang stopped or was re-rated since
        else:
            at = math.inf
        if self._pending_starts:
            at = min(at, self._pending_starts[0][0])
        return at if at < math.inf else None

    # -- introspection for the simulator and the service's simulated mode ----------------
    def gpu_load(self) -> Mapping[GpuId, float]:
        return self._gpu_load

    def progress(self, job_id: str, now: float) -> float:
        """Iterations done by ``now`` (the simulator's clock, which polls may not have seen)."""
        self._now = max(self._now, now)
        gang = self._gangs[job_id]
        self._settle(gang)
        return gang.done

    # -- internals ------------------------------------------------------------------------
    def _account_occupancy(self) -> None:
        if self._now > self._occupancy_at:
            span = self._now - self._occupancy_at
            self.shared_gpu_seconds += self._shared_gpus * span
            self.guest_gpu_seconds += self._guests * span
            self.guest_compute_seconds += max(self._guest_use, 0.0) * span
            self._occupancy_at = self._now

    def _neighbours(self, placement: Placement) -> set[str]:
        return {job_id for gpu in set(placement) for job_id in self._gpu_jobs.get(gpu, ())}

    def _settle(self, gang: _Gang) -> None:
        moment = max(self._now, gang.starts_at)
        if moment > gang.settled_at:
            total = float(gang.job.spec.iterations)
            if gang.curve is not None and gang.rate > 0:
                since, done = gang.curve_from
                left = total - done
                share = min((moment - since) * gang.rate / left, 1.0) if left > 0 else 1.0
                gang.done = min(done + left * gang.curve(share), total)
            else:
                gang.done = min(gang.done + gang.rate * (moment - gang.settled_at), total)
            gang.settled_at = moment

    def _component(self, job_ids: set[str]) -> set[str]:
        """``job_ids`` and every gang linked to them through shared GPUs."""
        seen = set(job_ids)
        frontier = list(job_ids)
        while frontier:
            gang = self._gangs.get(frontier.pop())
            if gang is None:
                continue
            for gpu in gang.load:
                for other in self._gpu_jobs.get(gpu, ()):
                    if other not in seen:
                        seen.add(other)
                        frontier.append(other)
        return seen

    def _sliced_times(self, job_ids: set[str]) -> dict[str, float]:
        """Co-located iteration times of the gangs that share a GPU (empty: nobody does,
        or some sharing gang's timing is unknown)."""
        if self._sliced is None:
            return {}
        sharing = {
            job_id
            for job_id in job_ids
            if any(len(self._gpu_jobs[gpu]) > 1 for gpu in self._gangs[job_id].load)
        }
        if not sharing:
            return {}
        timings: dict[str, GangTiming] = {}
        for job_id in sharing:
            gang = self._gangs[job_id]
            if not gang.timed:  # asked for only once the gang shares a GPU
                gang.timing = self._sliced.timing(gang.job, gang.placement, gang.plan)
                gang.timed = True
            timing = gang.timing
            if timing is None:
                return {}
            timings[job_id] = timing
        return self._shared_times(timings)

    def _guest_share(self, gang: _Gang, iteration_s: float) -> float:
        if gang.timing is None:
            return 0.0
        use = 0.0
        size = (len(gang.placement), gang.job.id)
        for gpu, busy in gang.timing.busy_s:
            others = self._gpu_jobs.get(gpu, ())
            if len(others) > 1 and any(
                (len(self._gangs[o].placement), o) > size for o in others if o in self._gangs
            ):
                use += busy / iteration_s
        return use

    def _rerate(self, job_ids: set[str]) -> None:
        job_ids = {j for j in job_ids if j in self._gangs}
        # With no GPU shared anywhere, every gang is its own component and none is sliced:
        # the walk and the sharing test below would find exactly that.
        shared = self._shared_gpus > 0
        if shared and self._sliced is not None:
            job_ids = self._component(job_ids)
        sliced = self._sliced_times(job_ids) if shared else {}
        for job_id in sorted(job_ids):
            gang = self._gangs[job_id]
            self._settle(gang)
            iteration_s = sliced.get(job_id)
            self._account_occupancy()
            self._guest_use -= gang.guest_use
            gang.guest_use = 0.0
            job = gang.job
            if self._curved is not None:
                # A curved gang's mean rate and curve both run from where it stands now.
                at_now = replace_job(job, iterations_done=gang.done)
                gang.curve = self._curved.progress_curve(at_now, gang.placement, gang.plan)
                gang.curve_from = (max(gang.settled_at, gang.starts_at), gang.done)
                job = at_now if gang.curve is not None else job
            if iteration_s is not None and self._sliced is not None:
                gang.rate = self._sliced.rate_at(job, gang.plan, iteration_s)
                gang.guest_use = self._guest_share(gang, iteration_s)
                self._guest_use += gang.guest_use
            else:
                others = {
                    gpu: self._gpu_load[gpu] - gang.load.get(gpu, 0.0)
                    for gpu in set(gang.placement)
                }
                gang.rate = self._rates.rate(job, gang.placement, gang.plan, others)
            self._token += 1
            gang.token = self._token
            remaining = gang.job.spec.iterations - gang.done
            if gang.rate > 0:
                finish = max(gang.settled_at, gang.starts_at) + remaining / gang.rate
                if math.isfinite(finish):
                    heapq.heappush(self._heap, (finish, gang.token, job_id))
