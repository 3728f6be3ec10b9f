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
import operator
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

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

    def entry(self, job: Job) -> tuple[float, float]:
        """(:func:`iteration_s`, seconds left without a run's progress)."""
        kept = self._memo.get(job)
        if kept is None:
            step = iteration_s(self.catalog, job)
            kept = (step, seconds_at(job, 0.0, False, step))
            self._memo.put(job, kept)
        return kept

    def iteration_s(self, job: Job) -> float:
        """:func:`iteration_s`, kept while the job is the same object."""
        return self.entry(job)[0]

    def seconds(self, job: Job, now: float, running: bool) -> float:
        """As :func:`remaining_seconds`, to the bit."""
        step, waiting = self.entry(job)
        if running and job.run_started_at is not None:
            return seconds_at(job, now, True, step)
        return waiting

    def seconds_many(
        self, jobs: Sequence[Job], now: float, running: bool | Iterable[bool]
    ) -> list[float]:
        """:meth:`seconds` of each job (``running``: of all, or per job), in order, to the
        bit: the arithmetic of :func:`seconds_at`, in one loop (the critical path asks it of
        every job every round where nothing is kept between rounds; else it reads the
        running side from :class:`RunningSeconds`)."""
        found: list[float] = []
        entries = self._memo.get_many(jobs)
        flags = itertools.repeat(running) if isinstance(running, bool) else running
        for job, kept, is_running in zip(jobs, entries, flags, strict=False):
            step, waiting = kept if kept is not None else self.entry(job)
            started = job.run_started_at
            if not is_running or started is None:
                found.append(waiting)
            elif step == math.inf:
                found.append(math.inf)
            else:
                done = job.iterations_done + max(now - started, 0.0) / step
                found.append(max(job.spec.iterations - done, 1.0) * step)
        return found


class RunningSeconds:
    """The running jobs' seconds left (:meth:`WorkLeft.seconds` with ``running``) and GPUs,
    as arrays: the arithmetic of :func:`seconds_at`, element by element, so the same values
    to the bit. The critical path asks it of every running job every round. Each job's fields
    sit in a row of one table while it is the same object (a job is replaced on every
    change; the table holds a reference to each job it has a row for, so no other object
    can take its ``id`` meanwhile). A running side that moved finds its rows by ``id`` in
    one sorted search, and one that did not (between events, every round) reuses the last
    round's arrays."""

    __slots__ = ("_arrays", "_free", "_gpus", "_held", "_ids", "_jobs", "_rows", "_table", "_work")

    _FIELDS = 6
    """Per row: iterations done, run start (NaN: none yet), iterations, seconds per
    iteration, seconds left without the run's progress, GPUs asked for."""

    def __init__(self, work: WorkLeft) -> None:
        self._work = work
        self._table = np.empty((64, self._FIELDS))
        self._free = list(range(63, -1, -1))
        self._ids: NDArray[np.int64] = np.empty(0, dtype=np.int64)
        """The ``id`` of every job with a row, ascending."""
        self._rows: NDArray[np.intp] = np.empty(0, dtype=np.intp)
        """Each one's row, in the same order."""
        self._held: dict[int, Job] = {}
        """Every job with a row, by ``id`` (the reference that keeps the ``id`` its own)."""
        self._jobs: Sequence[Job] = ()
        self._arrays: tuple[NDArray[np.float64], ...] = ()
        self._gpus: NDArray[np.int64] = np.empty(0, dtype=np.int64)
        self._load(())

    def of(self, jobs: Sequence[Job], now: float) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
        """(each job's seconds left, running since its run began; each job's GPUs asked for)."""
        if not (len(jobs) == len(self._jobs) and all(map(operator.is_, jobs, self._jobs))):
            self._load(jobs)
        done, started, iterations, step, waiting = self._arrays
        elapsed = np.maximum(now - started, 0.0) / step
        left = np.maximum(iterations - (done + elapsed), 1.0) * step
        return np.where(np.isnan(started), waiting, left), self._gpus

    def _load(self, jobs: Sequence[Job]) -> None:
        ids = np.fromiter(map(id, jobs), np.int64, len(jobs))
        known, rows = self._ids, self._rows
        at = known.searchsorted(ids)
        found = np.zeros(len(ids), dtype=bool)
        inside = at < len(known)
        found[inside] = known[at[inside]] == ids[inside]
        wanted = np.zeros(len(known), dtype=bool)
        wanted[at[found]] = True
        for gone in np.flatnonzero(~wanted).tolist():  # jobs no longer running: rows freed
            del self._held[int(known[gone])]
            self._free.append(int(rows[gone]))
        picked = np.empty(len(ids), dtype=np.intp)
        picked[found] = rows[at[found]]
        for index in np.flatnonzero(~found).tolist():  # jobs new to the running side
            job = jobs[index]
            picked[index] = self._row_of(job)
            self._held[id(job)] = job
        order = np.argsort(ids, kind="stable")
        self._ids, self._rows = ids[order], picked[order]
        table = self._table[picked]
        self._arrays = tuple(table[:, column] for column in range(5))
        self._gpus = table[:, 5].astype(np.int64)
        self._jobs = jobs

    def _row_of(self, job: Job) -> int:
        """A free row, filled with the job's fields."""
        if not self._free:
            size = len(self._table)
            self._table = np.concatenate([self._table, np.empty((size, self._FIELDS))])
            self._free = list(range(2 * size - 1, size - 1, -1))
        row = self._free.pop()
        step, waiting = self._work.entry(job)
        started = job.run_started_at
        self._table[row] = (
            job.iterations_done,
            math.nan if started is None else started,
            job.spec.iterations,
            step,
            waiting,
            job.spec.workers,
        )
        return row


class CompletionPaces:
    """Per job index, the completion guard's pace: 1 / (its speedup at the size it asked for
    x the seconds it still needs there, :func:`remaining_seconds`; 0 where either is unknown
    or none). Only the jobs the 0-1 program re-decides are ever read (:mod:`.solve`,
    :mod:`.joint_bound`), a few dozen of a round's hundreds, and most rounds that offer
    slots read none, so each job's pace is worked out when first read (the same arithmetic
    as :meth:`WorkLeft.seconds`, to the bit). Jobs of one size list share their choices, so
    a reference speedup is read once per choices and size asked for."""

    __slots__ = ("_found", "_now", "_references", "_views", "_work")

    def __init__(self, views: Sequence[JobView], work: WorkLeft, now: float) -> None:
        self._views, self._work, self._now = views, work, now
        self._found: dict[int, float] = {}
        self._references: dict[tuple[int, int], float] = {}

    def __bool__(self) -> bool:
        return True  # the guard is on (an empty list: off)

    def __len__(self) -> int:
        return len(self._views)

    def __getitem__(self, job: int) -> float:
        found = self._found.get(job)
        if found is None:
            found = self._found[job] = self._pace(self._views[job])
        return found

    def _pace(self, view: JobView) -> float:
        remaining_s = self._work.seconds(view.job, self._now, bool(view.current))
        if math.isinf(remaining_s):
            return 0.0
        wanted = view.job.spec.workers
        key = (id(view.choices), wanted)
        reference = self._references.get(key)
        if reference is None:
            sizes, speedups = view.choices.sizes.tolist(), view.choices.speedups
            at = speedups[sizes.index(wanted)] if wanted in sizes else speedups.max()
            reference = self._references[key] = float(at)
        return 1.0 / (reference * remaining_s) if reference > 0 else 0.0
