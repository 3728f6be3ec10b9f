"""A simulated executor: gangs progress at the rate a RateModel predicts, in virtual time.

Progress is settled lazily: a running gang keeps (iterations at last settle, rate, settle
time), and finish times sit in a heap, so a poll costs O(finished + re-rated) rather than
O(running). Rates change only when a gang starts, stops or re-plans next to a job sharing its
GPUs, and then only for the jobs on those GPUs.
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from jigsaw.cluster import GpuId, Placement
from jigsaw.domain import Job
from jigsaw.executor_events import ExecutorEvent, Finished, Progressed, Started
from jigsaw.plan import Plan

_EPS = 1e-9


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
        self._gangs[job.id] = gang
        for gpu, share in gang.load.items():
            self._gpu_load[gpu] += share
            self._gpu_jobs[gpu].add(job.id)
        heapq.heappush(self._pending_starts, (begins, job.id))
        self._rerate(self._neighbours(placement))

    def stop(self, job_id: str, *, checkpoint: bool) -> None:
        del checkpoint  # a simulated checkpoint is free; restart cost is in startup_s
        gang = self._gangs.pop(job_id, None)
        if gang is None:
            return
        for gpu, share in gang.load.items():
            self._gpu_load[gpu] -= share
            self._gpu_jobs[gpu].discard(job_id)
        self._rerate(self._neighbours(gang.placement))

    def replan(self, job_id: str, placement: Placement, plan: Plan) -> None:
        gang = self._gangs[job_id]
        self.stop(job_id, checkpoint=True)
        self._settle(gang)
        self.start(replace(gang.job, iterations_done=gang.done), placement, plan)
        self._gangs[job_id].started_reported = gang.started_reported

    def running_jobs(self) -> set[str]:
        return set(self._gangs)

    def poll(self, now: float) -> Sequence[ExecutorEvent]:
        self._now = now
        events: list[ExecutorEvent] = []
        while self._pending_starts and self._pending_starts[0][0] <= now + _EPS:
            at, job_id = heapq.heappop(self._pending_starts)
            gang = self._gangs.get(job_id)
            if gang is not None and not gang.started_reported and gang.starts_at == at:
                gang.started_reported = True
                events.append(Started(job_id, at))
        while self._heap and self._heap[0][0] <= now + _EPS:
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
        candidates = []
        if self._pending_starts:
            candidates.append(self._pending_starts[0][0])
        while self._heap and self._stale(self._heap[0]):
            heapq.heappop(self._heap)
        if self._heap:
            candidates.append(self._heap[0][0])
        return min(candidates) if candidates else None

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
    def _stale(self, entry: tuple[float, int, str]) -> bool:
        gang = self._gangs.get(entry[2])
        return gang is None or gang.token != entry[1]

    def _neighbours(self, placement: Placement) -> set[str]:
        return {job_id for gpu in set(placement) for job_id in self._gpu_jobs.get(gpu, ())}

    def _settle(self, gang: _Gang) -> None:
        moment = max(self._now, gang.starts_at)
        if moment > gang.settled_at:
            gang.done = min(
                gang.done + gang.rate * (moment - gang.settled_at), float(gang.job.spec.iterations)
            )
            gang.settled_at = moment

    def _rerate(self, job_ids: set[str]) -> None:
        for job_id in sorted(job_ids):
            gang = self._gangs[job_id]
            self._settle(gang)
            others = {
                gpu: self._gpu_load[gpu] - gang.load.get(gpu, 0.0) for gpu in set(gang.placement)
            }
            gang.rate = self._rates.rate(gang.job, gang.placement, gang.plan, others)
            self._token += 1
            gang.token = self._token
            remaining = gang.job.spec.iterations - gang.done
            if gang.rate > 0:
                finish = max(gang.settled_at, gang.starts_at) + remaining / gang.rate
                if math.isfinite(finish):
                    heapq.heappush(self._heap, (finish, gang.token, job_id))
