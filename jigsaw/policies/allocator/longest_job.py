"""The critical path: the jobs that set the makespan, kept running or started where
``protect_longest`` is on.

The *drain horizon* is how long the cluster needs, at best, to finish all the work it holds:
every running and waiting job's GPUs times its remaining seconds
(:mod:`.remaining`), summed and divided by the cluster's GPUs. A job whose own remaining
seconds reach the horizon cannot finish before everything else, however the rest is packed:
it is on the critical path, and every hour it waits is an hour more of makespan.

:func:`critical_path` (``critical_share`` > 0, the default 0.125): every critical job,
running or waiting, most seconds left first (a running one counted with ``critical_hold``,
3%, more, so that near-equals do not swap places at every minimum run's end), the first
always and the others while their GPUs fit in the share of the cluster. A running one
loses its off column (it is never preempted); a waiting one must start while the GPUs that
pinned and protected jobs do not hold suffice (:mod:`.must_run`), and the backlog never sets
it aside (:mod:`.round_backlog`).
Measured on Philly's fortnights (docs/BENCHMARKS.md, "The critical path started"):
philly-mid's makespan, set before by an 8-GPU job preempted before it was critical and a
16-GPU gang that waited 375 h behind shorter work, falls from 698.5 h to 550.6 h (las'
544.0 h); average JCT rises 0.8-2.2%.

:func:`longest_critical` (``critical_share`` 0, the rule of session 23): the running job
with the most seconds left, if critical, alone; a waiting job is never started for it. On
philly-high it kept the makespan at the shortest peer's (an 8-GPU job, preempted after 237 h
and kept waiting 391 h behind fresher jobs, set it before).

By the clock alone the set changes only where the arithmetic says: the horizon falls at the
running GPUs' share of the cluster, a running job's seconds at one per second and a waiting
job's not at all. So a kept running job stops being critical only while GPUs are idle
(:attr:`Longest.until`, :attr:`CriticalPath.until`), a waiting job becomes critical when the
horizon falls to its seconds, and where a critical job was passed over for the share, which
of them fit changes when a running job's seconds (counted with the hold) pass a waiting
one's.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from jigsaw.model.domain import Job


@dataclass(frozen=True, slots=True)
class Longest:
    job_id: str | None
    """The running job kept (``None``: none is critical)."""
    until: float
    """When it stops being critical by the clock alone (``inf``: not before an event)."""


NONE = Longest(None, math.inf)


Left = tuple[float, str, int, bool]
"""A job's seconds left, id, GPUs and whether it runs."""

RemainingMany = Callable[[Sequence[Job], bool], list[float]]
"""``remaining_s`` of many jobs at once, in order (the same values, for less work)."""

RunningSide = Callable[[Sequence[Job]], tuple[NDArray[np.float64], NDArray[np.int64]]]
"""The running jobs' seconds left and GPUs asked for, as arrays (the same values)."""


class WaitingWork:
    """The waiting jobs' seconds left and the GPU-seconds they hold, kept between rounds:
    whole while the waiting side is the same job objects in the same order (between events
    a round's waiting side is a new tuple of the very jobs of the last), and job by job
    otherwise (a waiting job's seconds left read its own fields only,
    :class:`~.remaining.WorkLeft`). The sum runs over the jobs in order, as a pass over
    them all would."""

    __slots__ = ("_entries", "_jobs", "_lefts", "_work")

    def __init__(self) -> None:
        self._jobs: Sequence[Job] = ()
        self._lefts: list[Left] = []
        self._work = 0.0
        self._entries: dict[int, tuple[Job, Left | None]] = {}

    def of(
        self, waiting: Sequence[Job], remaining_s: Callable[[Job, bool], float]
    ) -> tuple[list[Left], float]:
        """(each waiting job with a known estimate, their summed GPU-seconds)."""
        if len(waiting) == len(self._jobs) and all(map(operator.is_, waiting, self._jobs)):
            return self._lefts, self._work
        entries = self._entries
        fresh: dict[int, tuple[Job, Left | None]] = {}
        lefts: list[Left] = []
        work = 0.0
        for job in waiting:
            key = id(job)
            kept = entries.get(key)
            item = (
                kept[1] if kept is not None and kept[0] is job else _left(job, False, remaining_s)
            )
            fresh[key] = (job, item)
            if item is not None:
                work += item[2] * item[0]
                lefts.append(item)
        self._jobs, self._lefts, self._work, self._entries = waiting, lefts, work, fresh
        return lefts, work


def _left(job: Job, is_running: bool, remaining_s: Callable[[Job, bool], float]) -> Left | None:
    """The job's entry (``None``: its seconds left are unknown, never counted)."""
    left = remaining_s(job, is_running)
    return (left, job.id, job.spec.workers, is_running) if math.isfinite(left) else None


def _side(
    jobs: Sequence[Job],
    is_running: bool,
    remaining_s: Callable[[Job, bool], float],
    many: RemainingMany | None = None,
) -> tuple[list[Left], float]:
    seconds = (
        many(jobs, is_running)
        if many is not None
        else [remaining_s(job, is_running) for job in jobs]
    )
    work = 0.0
    lefts: list[Left] = []
    for job, left in zip(jobs, seconds, strict=True):
        if math.isfinite(left):
            gpus = job.spec.workers
            work += gpus * left
            lefts.append((left, job.id, gpus, is_running))
    return lefts, work


def _work_left(
    running: Sequence[Job],
    waiting: Sequence[Job],
    remaining_s: Callable[[Job, bool], float],
    kept: WaitingWork | None = None,
    many: RemainingMany | None = None,
) -> tuple[list[Left], float, int]:
    """Every job with a known estimate (running ones first), the GPU-seconds of work they
    hold and the GPUs the running ones use: the drain horizon is ``work / capacity``.
    ``kept``: the waiting side's, kept between rounds; ``many``: ``remaining_s`` of many
    jobs at once."""
    lefts, work = _side(running, True, remaining_s, many)
    busy = sum(gpus for _, _, gpus, _ in lefts)
    if kept is not None:
        waiting_lefts, waiting_work = kept.of(waiting, remaining_s)
    else:
        waiting_lefts, waiting_work = _side(waiting, False, remaining_s, many)
    return [*lefts, *waiting_lefts], work + waiting_work, busy


def longest_critical(
    running: Sequence[Job],
    waiting: Sequence[Job],
    capacity: int,
    now: float,
    remaining_s: Callable[[Job, bool], float],
    kept: WaitingWork | None = None,
    many: RemainingMany | None = None,
) -> Longest:
    """The running job with the most seconds left, if they reach the drain horizon of
    ``running`` and ``waiting`` on ``capacity`` GPUs; ``remaining_s(job, running)``: its
    seconds of work left (``inf``: unknown, never counted)."""
    if capacity <= 0 or not running:
        return NONE
    lefts, work, busy = _work_left(running, waiting, remaining_s, kept, many)
    best: tuple[float, str] | None = None
    for left, job_id, _gpus, is_running in lefts:
        if not is_running:
            continue
        # The most left; of equals, the earliest id (a rule that does not move by the clock).
        if best is None or left > best[0] or (left == best[0] and job_id < best[1]):
            best = (left, job_id)
    if best is None:
        return NONE
    horizon = work / capacity
    left, job_id = best
    if left < horizon:
        return NONE
    # d(left - horizon)/dt = -1 + busy / capacity: it falls only while GPUs are idle.
    falls = 1.0 - busy / capacity
    until = now + (left - horizon) / falls if falls > 0 else math.inf
    return Longest(job_id, until)


@dataclass(frozen=True, slots=True)
class CriticalPath:
    """The jobs a round keeps on the critical path."""

    running: frozenset[str]
    """Running jobs kept running (they lose their off column)."""
    waiting: tuple[str, ...]
    """Waiting jobs that must start, most work left first, while the GPUs suffice."""
    until: float
    """When the set may change by the clock alone (``inf``: not before an event)."""

    @property
    def key(self) -> tuple[frozenset[str], tuple[str, ...]]:
        """What of it a job's columns read (kept rows hold while it is the same)."""
        return (self.running, self.waiting)


NO_PATH = CriticalPath(frozenset(), (), math.inf)


def of_longest(longest: Longest) -> CriticalPath:
    """The longest running job's pin as a critical path (``critical_share`` 0)."""
    if longest.job_id is None:
        return NO_PATH
    return CriticalPath(frozenset((longest.job_id,)), (), longest.until)


def critical_path(
    running: Sequence[Job],
    waiting: Sequence[Job],
    capacity: int,
    now: float,
    remaining_s: Callable[[Job, bool], float],
    gpu_share: float,
    hold: float = 0.0,
    kept: WaitingWork | None = None,
    many: RemainingMany | None = None,
    running_side: RunningSide | None = None,
) -> CriticalPath:
    """Every job, running or waiting, whose seconds left reach the drain horizon of
    ``running`` and ``waiting`` on ``capacity`` GPUs, most left first (of equals, the
    earliest id; a running job counted with ``hold`` more of its seconds): the first always
    (the old rule's pin, on any cluster), the others while their GPUs stay within
    ``gpu_share`` of ``capacity``; a critical job that does not fit is passed over for
    smaller ones after it. ``kept``: the waiting side's work, kept between rounds; ``many``:
    ``remaining_s`` of many jobs at once; ``running_side``: the running jobs' seconds left
    and GPUs as arrays (the same values: only the few critical ones are then read one by
    one)."""
    if capacity <= 0:
        return NO_PATH
    seconds, gpus = _running_arrays(running, remaining_s, many, running_side)
    known = np.isfinite(seconds)
    known_gpus = gpus[known]
    # Summed in order, one job after another, as a loop over them would (an accumulation,
    # not numpy's pairwise sum: the same float).
    products = known_gpus * seconds[known]
    work = float(np.add.accumulate(products)[-1]) if len(products) else 0.0
    busy = int(known_gpus.sum())
    if kept is not None:
        waiting_lefts, waiting_work = kept.of(waiting, remaining_s)
    else:
        waiting_lefts, waiting_work = _side(waiting, False, remaining_s, many)
    if not len(products) and not waiting_lefts:
        return NO_PATH
    horizon = (work + waiting_work) / capacity
    # A running job ranks as if it had ``hold`` more of its seconds left: between near-equals
    # the one running keeps its place (no swap at every minimum run's end). Only the
    # critical ones are ranked.
    running_critical: list[Left] = [
        (float(seconds[at]), running[at].id, int(gpus[at]), True)
        for at in np.flatnonzero(known & (seconds >= horizon)).tolist()
    ]
    critical = [*running_critical, *(item for item in waiting_lefts if item[0] >= horizon)]
    critical.sort(key=lambda item: (-item[0] * (1.0 + hold if item[3] else 1.0), item[1]))
    budget = gpu_share * capacity
    kept_running: set[str] = set()
    kept_waiting: list[str] = []
    passed_over = False
    for _left, job_id, job_gpus, is_running in critical:
        if job_gpus > budget and (kept_running or kept_waiting):
            passed_over = True
            continue
        budget -= job_gpus
        if is_running:
            kept_running.add(job_id)
        else:
            kept_waiting.append(job_id)
    path = CriticalPath(frozenset(kept_running), tuple(kept_waiting), math.inf)
    until = _path_until(
        running_critical, waiting_lefts, path, horizon, busy / capacity, now, passed_over, hold
    )
    return dataclasses.replace(path, until=until)


def _running_arrays(
    running: Sequence[Job],
    remaining_s: Callable[[Job, bool], float],
    many: RemainingMany | None,
    running_side: RunningSide | None,
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Each running job's seconds left and GPUs, as arrays."""
    if running_side is not None:
        return running_side(running)
    listed = many(running, True) if many is not None else [remaining_s(j, True) for j in running]
    gpus = np.fromiter((job.spec.workers for job in running), np.int64, len(running))
    return np.array(listed, dtype=np.float64).reshape(len(running)), gpus


def _path_until(
    running_critical: list[Left],
    waiting_lefts: list[Left],
    path: CriticalPath,
    horizon: float,
    busy_share: float,
    now: float,
    passed_over: bool,
    hold: float,
) -> float:
    """When the critical set may change by the clock alone. The horizon falls at the busy
    GPUs' share of the cluster, a running job's seconds at one per second and a waiting
    job's not at all: a kept running job stops being critical when its seconds fall below
    the horizon (only while GPUs are idle), and a waiting job becomes critical when the
    horizon falls to its seconds. Where a critical job was passed over for the GPU share,
    which of them fit may change when a running job's seconds (counted with ``hold`` more)
    pass a waiting one's."""
    until = math.inf
    falls = 1.0 - busy_share
    waiting_critical: list[float] = []
    # Only critical running jobs can be kept ones (``running_critical``: those whose seconds
    # reach the horizon, in order); the others change nothing here.
    for left, job_id, _gpus, _running in running_critical:
        if job_id in path.running and falls > 0:
            until = min(until, now + (left - horizon) / falls)
    for left, _job_id, _gpus, _running in waiting_lefts:
        if left < horizon:
            if busy_share > 0:
                until = min(until, now + (horizon - left) / busy_share)
        else:
            waiting_critical.append(left)
    if passed_over and waiting_critical:
        waiting_critical.sort()
        for left, _job_id, _gpus, _running in running_critical:
            # It ranks at left x (1 + hold), falling at (1 + hold) per second.
            below = bisect.bisect_left(waiting_critical, left * (1.0 + hold))
            if below:
                until = min(until, now + left - waiting_critical[below - 1] / (1.0 + hold))
    return until
