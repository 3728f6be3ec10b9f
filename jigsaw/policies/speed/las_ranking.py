"""The LAS ranking kept across rounds (part of :mod:`jigsaw.policies.speed.round_memory`).

A job's key (:func:`~jigsaw.policies.shared.fairness.las_standing`) changes only when its record
changes (a start, a stop, an edit) or when time carries its attained service across a
threshold or flips its starvation test. Each crossing is the root of a linear function of
time, so a key computed at ``t`` stays right until the job's next root (``due``).

:class:`LasRanking` keeps the keys in a sorted list and the roots in a heap. A round:

1. re-keys the records that are new since the last snapshot and whose key fields changed
   (:func:`signature`), and drops the jobs absent from the snapshot (finished, cancelled,
   failed, preempted out of sight), so a snapshot is never ranked on stale data, whatever
   happened between rounds;
2. re-keys the jobs whose root is due (from ``MARGIN_S`` before it, so float round-off at
   a crossing never leaves a stale key);
3. reads the order off the sorted keys.

The order is the one :func:`~jigsaw.policies.shared.fairness.las_order` gives, and
:meth:`LasRanking.stable_until` what :func:`~jigsaw.policies.shared.fairness.las_stable_until`
gives (tests/core/policies/test_las_ranking.py).
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from jigsaw.model.domain import Job
from jigsaw.policies.shared.fairness import LasConfig, LasKey, job_stable_until, las_standing
from jigsaw.policies.speed.record_diff import changed_records

Signature = tuple[float, float | None, int, int, int, float]

MARGIN_S = 1.0
"""A key is recomputed from this long before a root until this long after it."""
_FLAT = 1e-9
"""A starvation test whose slope is below this is treated as flat; when it also sits within
``_EDGE`` of zero, float jitter could flip it any round: such a job is re-keyed every round."""
_EDGE = 1e-3
_SLACK = 1e-3
"""Roots computed at different moments agree to far better than this (float round-off)."""


class Rooted(Protocol):
    """A kept key's record and the next root it was computed with."""

    @property
    def job(self) -> Job: ...

    @property
    def due(self) -> float: ...


@dataclass(slots=True)
class _Entry:
    job: Job
    signature: Signature
    key: LasKey
    due: float


def signature(job: Job) -> Signature:
    """Every field :func:`~jigsaw.policies.shared.fairness.las_standing` reads of a job."""
    return (
        job.attained_gpu_seconds,
        job.run_started_at,
        len(job.placement),
        job.spec.workers,
        job.spec.priority,
        job.submitted_at,
    )


def key_and_due(job: Job, now: float, config: LasConfig) -> tuple[LasKey, float]:
    """The job's key at ``now`` and the earliest time from ``now - MARGIN_S`` on at which it
    may change (a root of its crossings)."""
    standing = las_standing(job, now, config)
    due = standing.next_threshold_at
    for value, slope in standing.starvation:
        if slope != 0.0:
            root = now - value / slope
            if now - MARGIN_S <= root < due:
                due = root
        if abs(slope) <= _FLAT and abs(value) < _EDGE:
            due = now  # on the edge of a flat test: look again every round
    return standing.key, due


def pop_due(heap: list[tuple[float, str]], entries: Mapping[str, Rooted], now: float) -> list[str]:
    """Take off ``heap`` (of (due, job id)) the jobs whose key is due for recomputing at
    ``now``: from ``MARGIN_S`` before their root on. Items whose due no longer matches their
    entry are stale and dropped."""
    due: list[str] = []
    horizon = now + MARGIN_S
    while heap and heap[0][0] < horizon:
        at, job_id = heapq.heappop(heap)
        entry = entries.get(job_id)
        if entry is not None and entry.due == at:
            due.append(job_id)
    return due


def compact(
    heap: list[tuple[float, str]], entries: Mapping[str, Rooted]
) -> list[tuple[float, str]]:
    """``heap`` rebuilt from ``entries`` once stale items outnumber live ones."""
    if len(heap) <= 2 * len(entries) + 64:
        return heap
    heap = [(entry.due, job_id) for job_id, entry in entries.items()]
    heapq.heapify(heap)
    return heap


def soonest_change(
    heap: list[tuple[float, str]], entries: Mapping[str, Rooted], now: float, config: LasConfig
) -> float:
    """The earliest time at which a kept key may change, found from ``heap``: only jobs
    whose cached root is near the earliest are computed afresh (``heap`` is left as it was)."""
    best = math.inf
    popped: list[tuple[float, str]] = []
    while heap and heap[0][0] - _SLACK <= best:
        item = heapq.heappop(heap)
        popped.append(item)
        entry = entries.get(item[1])
        if entry is not None and entry.due == item[0]:
            best = min(best, job_stable_until(entry.job, now, config))
    for item in popped:
        heapq.heappush(heap, item)
    return best


class LasRanking:
    """The LAS order of the active jobs, kept across rounds (see the module docstring)."""

    def __init__(self, config: LasConfig) -> None:
        self.config = config
        self._entries: dict[str, _Entry] = {}
        self._keys: list[LasKey] = []
        """Sorted; unique, since a key ends with the job id."""
        self._jobs: list[Job] = []
        """The job of each key, in the same order: the ranking."""
        self._records: dict[str, Job] = {}
        """The record each entry was keyed from, by job id (``changed_records`` reads it)."""
        self._due: list[tuple[float, str]] = []
        """Heap of (due, job id); an item whose due no longer matches its entry is stale."""
        self._now = -math.inf
        self.rekeyed = 0
        """Keys computed so far (for tests and profiles)."""

    # -- the two questions a policy asks ----------------------------------------------------
    def order(self, jobs: Sequence[Job], now: float) -> list[Job]:
        """``jobs`` in LAS order at ``now``."""
        self._sync(jobs, now)
        return list(self._jobs)

    def stable_until(self, jobs: Sequence[Job], now: float) -> float:
        """The earliest time at which a key may change, found from the heap: only jobs whose
        cached root is near the earliest are computed afresh."""
        self._sync(jobs, now)
        return soonest_change(self._due, self._entries, now, self.config)

    # -- keeping the cache right ------------------------------------------------------------
    def _sync(self, jobs: Sequence[Job], now: float) -> None:
        try:
            self._fix_up(jobs, now)
        except Exception:
            self._reset()  # half fixed up (a job whose key cannot be computed): start over
            self._now = -math.inf
            raise

    def _fix_up(self, jobs: Sequence[Job], now: float) -> None:
        if now < self._now:
            self._reset()  # time went back (a different world): nothing cached holds
        self._now = now
        entries = self._entries
        added, gone = changed_records(self._records, jobs)
        for job_id in gone:
            self._drop(job_id)
        for job in added:
            entry = entries.get(job.id)
            if entry is not None and signature(job) == entry.signature:
                entry.job = self._records[job.id] = job
                self._jobs[self._index(entry.key)] = job
            else:
                self._put(job, now)
        for job_id in pop_due(self._due, entries, now):
            self._put(entries[job_id].job, now)
        self._due = compact(self._due, entries)

    def _put(self, job: Job, now: float) -> None:
        key, due = key_and_due(job, now, self.config)
        self.rekeyed += 1
        self._records[job.id] = job
        entry = self._entries.get(job.id)
        if entry is None:
            self._entries[job.id] = _Entry(job, signature(job), key, due)
            self._insert(key, job)
        else:
            if entry.key != key:
                self._remove_key(entry.key)
                self._insert(key, job)
            else:
                self._jobs[self._index(key)] = job
            entry.job, entry.signature, entry.key, entry.due = job, signature(job), key, due
        if due < math.inf:
            heapq.heappush(self._due, (due, job.id))

    def _drop(self, job_id: str) -> None:
        entry = self._entries.pop(job_id)
        del self._records[job_id]
        self._remove_key(entry.key)

    def _insert(self, key: LasKey, job: Job) -> None:
        index = bisect.bisect_left(self._keys, key)
        self._keys.insert(index, key)
        self._jobs.insert(index, job)

    def _index(self, key: LasKey) -> int:
        index = bisect.bisect_left(self._keys, key)
        assert self._keys[index] == key, "LAS ranking lost a key"
        return index

    def _remove_key(self, key: LasKey) -> None:
        index = self._index(key)
        del self._keys[index]
        del self._jobs[index]

    def _reset(self) -> None:
        self._entries.clear()
        self._keys.clear()
        self._jobs.clear()
        self._due.clear()
        self._records.clear()
