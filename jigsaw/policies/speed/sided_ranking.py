"""The LAS ranking kept from a snapshot's changes, with each job's side (part of
:mod:`jigsaw.policies.speed.round_memory`).

:class:`~jigsaw.policies.speed.las_ranking.LasRanking` finds what changed in a list of jobs
itself; this one is told, side by side (:class:`~jigsaw.policies.speed.record_diff.SnapshotDiff`),
and keeps what a gang round reads of each job in its place in the order
(:class:`RankedJob`): its id, its gang size, its side. The order's lists hold these entries,
so a new record whose key comes out as before (most of them: a gang starting or stopping
mostly keeps its queue) is swapped into its entry and moves in no list. Keys are computed as
:class:`LasRanking` computes them (:func:`key_and_due`, only when a field the key reads
changed), and due keys are recomputed from the same heap of roots. The running jobs also
keep an order of their own (:attr:`SidedLasRanking.held`), for a gang round that has only
running gangs left to look at.

The order is :func:`~jigsaw.policies.shared.fairness.las_order`'s
(tests/core/policies/test_sided_ranking.py).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

from jigsaw.model.domain import Job
from jigsaw.model.sorted_pairs import SortedPairs
from jigsaw.policies.shared.fairness import LasConfig, LasKey
from jigsaw.policies.speed.las_ranking import (
    Signature,
    compact,
    key_and_due,
    pop_due,
    signature,
    soonest_change,
)
from jigsaw.policies.speed.record_diff import SnapshotChanges


@dataclass(slots=True)
class RankedJob:
    """One job in the ranking: its record and what a gang round reads of it."""

    job: Job
    id: str
    workers: int
    held: bool
    """On the snapshot's running side."""
    key: LasKey
    signature: Signature
    due: float


class SidedLasRanking:
    def __init__(self, config: LasConfig) -> None:
        self.config = config
        self._entries: dict[str, RankedJob] = {}
        # Ranked jobs by key (unique: each ends with the job id), all and the running ones.
        self._all: SortedPairs[LasKey, RankedJob] = SortedPairs()
        self._held: SortedPairs[LasKey, RankedJob] = SortedPairs()
        self._due: list[tuple[float, str]] = []
        """Heap of (due, job id); an item whose due no longer matches its entry is stale."""
        self.rekeyed = 0
        """Keys computed so far (for tests and profiles)."""

    # -- what a round reads (never to be changed by it) -------------------------------------
    @property
    def ranked(self) -> Sequence[RankedJob]:
        """Every job, best first."""
        return self._all.items

    @property
    def keys(self) -> Sequence[LasKey]:
        """The key of each of :attr:`ranked`, in the same order."""
        return self._all.keys

    @property
    def held(self) -> Sequence[RankedJob]:
        """The running jobs, best first."""
        return self._held.items

    @property
    def held_keys(self) -> Sequence[LasKey]:
        return self._held.keys

    def entry(self, job_id: str) -> RankedJob:
        return self._entries[job_id]

    def soonest_change(self, now: float) -> float:
        """The earliest time at which a key may change
        (:func:`~jigsaw.policies.shared.fairness.las_stable_until` of the jobs taken in)."""
        return soonest_change(self._due, self._entries, now, self.config)

    # -- taking changes in ------------------------------------------------------------------
    def update(self, changes: SnapshotChanges, now: float) -> None:
        """Take in what changed since the last snapshot, and recompute the keys due at
        ``now``. Time must not go back, and a ranking that raised here is half fixed up:
        the caller starts a new one (:class:`~jigsaw.policies.speed.kept_las_round.KeptLasRound`
        does both)."""
        entries = self._entries
        for job_id in changes.gone:
            entry = entries.pop(job_id)
            self._all.remove(entry.key)
            if entry.held:
                self._held.remove(entry.key)
        for job in changes.running_added:
            self._take(job, now, True)
        for job in changes.waiting_added:
            self._take(job, now, False)
        for job_id in pop_due(self._due, entries, now):
            entry = entries[job_id]
            self._rekey(entry, entry.job, entry.held, now)
        self._due = compact(self._due, entries)

    def _take(self, job: Job, now: float, held: bool) -> None:
        entry = self._entries.get(job.id)
        if entry is None:
            key, due = key_and_due(job, now, self.config)
            self.rekeyed += 1
            entry = RankedJob(job, job.id, job.spec.workers, held, key, signature(job), due)
            self._entries[job.id] = entry
            self._all.insert(key, entry)
            if held:
                self._held.insert(key, entry)
            if due < math.inf:
                heapq.heappush(self._due, (due, job.id))
        elif signature(job) == entry.signature:
            entry.job = job  # the key and the gang size read the same fields
            if entry.held != held:
                self._side(entry, held)
        else:
            self._rekey(entry, job, held, now)

    def _rekey(self, entry: RankedJob, job: Job, held: bool, now: float) -> None:
        key, due = key_and_due(job, now, self.config)
        self.rekeyed += 1
        if key != entry.key:
            self._all.remove(entry.key)
            if entry.held:
                self._held.remove(entry.key)
            entry.key = key
            self._all.insert(key, entry)
            if entry.held:
                self._held.insert(key, entry)
        if entry.held != held:
            self._side(entry, held)
        entry.job, entry.workers, entry.signature, entry.due = (
            job,
            job.spec.workers,
            signature(job),
            due,
        )
        if due < math.inf:
            heapq.heappush(self._due, (due, job.id))

    def _side(self, entry: RankedJob, held: bool) -> None:
        if held:
            self._held.insert(entry.key, entry)
        else:
            self._held.remove(entry.key)
        entry.held = held
