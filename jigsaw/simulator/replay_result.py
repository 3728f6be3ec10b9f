"""What a replay returns: :class:`ReplayResult`, with its summary (JCT percentiles, makespan,
utilization, cluster and busy efficiency, decision counts) computed from the final store."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from jigsaw.model.domain import Job
from jigsaw.model.lifecycle import JobState
from jigsaw.scheduling.memstore import InMemoryStore
from jigsaw.simulator.decisionlog import DecisionLog
from jigsaw.simulator.metrics import BusyTimeline, percentile, wanted_gpu_seconds
from jigsaw.simulator.rates import ReferenceRate


@dataclass(slots=True)
class ReplayResult:
    policy: str
    store: InMemoryStore
    log: DecisionLog
    timeline: BusyTimeline
    num_gpus: int
    rounds: int
    cycles: int
    wall_s: float
    stalled: bool
    useful_gpu_s: float
    first_submit: float
    last_finish: float
    summary: dict[str, Any]


def replay_result(
    policy: str,
    store: InMemoryStore,
    log: DecisionLog,
    timeline: BusyTimeline,
    rates: ReferenceRate,
    num_gpus: int,
    *,
    rounds: int,
    cycles: int,
    wall: float,
    stalled: bool,
    too_large: int,
) -> ReplayResult:
    """The result of a replay whose jobs, decisions and busy GPUs are in ``store``, ``log``
    and ``timeline``; ``too_large`` jobs were never submitted (their gang exceeds the
    cluster)."""
    jobs = store.all_jobs()
    first = min((j.submitted_at for j in jobs), default=0.0)
    done = [j for j in jobs if j.state == JobState.SUCCEEDED and j.finished_at is not None]
    last = max((j.finished_at or first for j in done), default=first)
    jcts = [(j.finished_at or 0.0) - j.submitted_at for j in done]
    useful = _useful_gpu_s(jobs, rates)
    makespan = last - first
    busy = timeline.area_until(last)
    wanted = _wanted_gpu_s(jobs, last, num_gpus)
    summary: dict[str, Any] = {
        "policy": policy,
        "jobs": len(jobs),
        "completed": len(done),
        "avg_jct_s": math.fsum(jcts) / len(jcts) if jcts else math.nan,
        "p50_jct_s": percentile(jcts, 50),
        "p99_jct_s": percentile(jcts, 99),
        "makespan_s": makespan,
        "utilization": busy / (num_gpus * makespan) if makespan > 0 else math.nan,
        "cluster_efficiency": useful / wanted if wanted > 0 else math.nan,
        "busy_efficiency": useful / busy if busy > 0 else math.nan,
        "preemptions": sum(j.preemptions for j in jobs),
        "replans": log.counts["replan"],
        "resizes": log.counts["resize"],
        "packed_starts": log.packed_starts,
        "starts": log.counts["start"],
        "rounds": rounds,
        "cycles": cycles,
        "stalled": stalled,
        "skipped_too_large": too_large,
        "decision_log_sha256": log.sha256,
        "wall_s": wall,
    }
    return ReplayResult(
        summary["policy"],
        store,
        log,
        timeline,
        num_gpus,
        rounds,
        cycles,
        wall,
        stalled,
        useful,
        first,
        last,
        summary,
    )


def _useful_gpu_s(jobs: Sequence[Job], rates: ReferenceRate) -> float:
    """GPU-seconds of the work done, at each job's reference (exclusive, full) rate."""
    return math.fsum(
        min(j.iterations_done, j.spec.iterations) / rates.reference_rate(j) * j.spec.workers
        for j in jobs
        if j.iterations_done > 0
    )


def _wanted_gpu_s(jobs: Sequence[Job], last: float, num_gpus: int) -> float:
    """GPU-seconds the jobs asked for while they were in the system (to ``last``)."""
    return wanted_gpu_seconds(
        [
            (
                j.submitted_at,
                j.finished_at if j.finished_at is not None else last,
                min(j.spec.workers, num_gpus),
            )
            for j in jobs
        ],
        num_gpus,
    )
