"""How long a job still needs on GPUs of its own: the completion guard's pace and the
starvation reservation's backfill both ask it.

The estimate is the job's remaining iterations at its best exclusive plan's iteration time at
the size it asked for (:meth:`~jigsaw.policies.shared.plans.PlanCatalog.default_option`). A
running job's progress since its run began is counted at that speed, which errs towards
less remaining (a host near its end is protected; a backfilled job is trusted to end a
little early, the reservation's only risk).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from jigsaw.model.domain import Job
from jigsaw.policies.allocator.job_memo import JobMemo
from jigsaw.policies.shared.plans import PlanCatalog

if TYPE_CHECKING:
    from jigsaw.policies.allocator.configurations import JobView


def remaining_seconds(catalog: PlanCatalog, job: Job, now: float, running: bool) -> float:
    """Seconds of work left at the job's requested size; ``inf`` for a job the catalog cannot
    price (no profile), so it is never taken for short."""
    return seconds_at(job, now, running, iteration_s(catalog, job))


def iteration_s(catalog: PlanCatalog, job: Job) -> float:
    """Seconds per iteration at the job's requested size (``inf``: unpriced)."""
    option = catalog.default_option(job)
    return option.eta / option.goodput if option.goodput > 0 else math.inf


def seconds_at(job: Job, now: float, running: bool, iteration_s: float) -> float:
    """The job's seconds of work left at ``iteration_s`` a step: its remaining iterations, less
    (``running``) the progress of its run since it began, counted at that speed."""
    if iteration_s == math.inf:
        return math.inf
    done = job.iterations_done
    if running and job.run_started_at is not None:
        done += max(now - job.run_started_at, 0.0) / iteration_s
    return max(job.spec.iterations - done, 1.0) * iteration_s


class WorkLeft:
    """:func:`remaining_seconds` with each job's iteration time, and its seconds left counted
    without a run's progress, kept while the job is the same object (a job is replaced on
    every change, and its options depend on its own fields only,
    :meth:`~jigsaw.policies.shared.plans.PlanCatalog.options_key`). The work-left weight
    and the critical path ask it of every job every round. Entries not asked for a round
    are dropped."""

    __slots__ = ("_memo", "catalog")

    def __init__(self, catalog: PlanCatalog) -> None:
        self.catalog = catalog
        self._memo: JobMemo[tuple[float, float]] = JobMemo()

    def next_round(self) -> None:
        """Keep what the last round asked; forget what the round before asked."""
        self._memo.next_round()

    def _entry(self, job: Job) -> tuple[float, float]:
        """(:func:`iteration_s`, seconds left without a run's progress)."""
        kept = self._memo.get(job)
        if kept is None:
            step = iteration_s(self.catalog, job)
            kept = (step, seconds_at(job, 0.0, False, step))
            self._memo.put(job, kept)
        return kept

    def iteration_s(self, job: Job) -> float:
        """:func:`iteration_s`, kept while the job is the same object."""
        return self._entry(job)[0]

    def seconds(self, job: Job, now: float, running: bool) -> float:
        """As :func:`remaining_seconds`, to the bit."""
        step, waiting = self._entry(job)
        if running and job.run_started_at is not None:
            return seconds_at(job, now, True, step)
        return waiting

    def seconds_many(
        self, jobs: Sequence[Job], now: float, running: bool | Iterable[bool]
    ) -> list[float]:
        """:meth:`seconds` of each job (``running``: of all, or per job), in order, to the
        bit: the arithmetic of :func:`seconds_at`, in one loop (the critical path and the
        completion guard ask it of every job every round)."""
        found: list[float] = []
        entries = self._memo.get_many(jobs)
        flags = itertools.repeat(running) if isinstance(running, bool) else running
        for job, kept, is_running in zip(jobs, entries, flags, strict=False):
            step, waiting = kept if kept is not None else self._entry(job)
            started = job.run_started_at
            if not is_running or started is None:
                found.append(waiting)
            elif step == math.inf:
                found.append(math.inf)
            else:
                done = job.iterations_done + max(now - started, 0.0) / step
                found.append(max(job.spec.iterations - done, 1.0) * step)
        return found


def completion_paces(views: Sequence[JobView], work: WorkLeft, now: float) -> list[float]:
    """Per job, completions per second per unit of speedup: 1 / (its speedup at the size it
    asked for x the seconds it still needs there, :func:`remaining_seconds`; 0 where either
    is unknown or none), the completion guard's pace (:mod:`.solve`). Jobs of one size list
    share their choices, so a reference speedup is read once per choices and size asked
    for."""
    running = [bool(view.current) for view in views]
    seconds = work.seconds_many([view.job for view in views], now, running)
    references: dict[tuple[int, int], float] = {}
    paces: list[float] = []
    for view, remaining_s in zip(views, seconds, strict=True):
        if math.isinf(remaining_s):
            paces.append(0.0)
            continue
        wanted = view.job.spec.workers
        key = (id(view.choices), wanted)
        reference = references.get(key)
        if reference is None:
            sizes, speedups = view.choices.sizes.tolist(), view.choices.speedups
            at = speedups[sizes.index(wanted)] if wanted in sizes else speedups.max()
            reference = references[key] = float(at)
        paces.append(1.0 / (reference * remaining_s) if reference > 0 else 0.0)
    return paces
