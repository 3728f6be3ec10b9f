"""What a policy remembers between rounds, and within one, to decide faster but never differently.

The policies read as if every round started from nothing: rank every active job, book every
running gang's load on the GPUs, offer every waiting job a place. A trace replay runs that
round a hundred thousand times over hundreds of active jobs, so :class:`RoundMemory` keeps
what the last round already worked out, and is the one door to that state. Its answers are
exactly those of working everything out afresh; ``incremental=False`` does just that, and
tests/core/policies (test_incremental_decisions.py, test_las_ranking.py) hold the kept path
to it, decision for decision.

Why keeping is safe: the store hands out a new, immutable :class:`~jigsaw.model.domain.Job` for
every change. The records a round sees that the last round did not (found by object identity,
:func:`~jigsaw.policies.speed.record_diff.record_diff`) are exactly the jobs that changed, whatever
happened between rounds; everything kept is fixed up from those alone.

- **The LAS ranking** (:class:`~jigsaw.policies.speed.las_ranking.LasRanking`): keys in a sorted
  list, each key's next crossing in a heap; a round re-keys the changed jobs and those whose
  crossing is due.
- **A LAS gang round's state** (:class:`~jigsaw.policies.speed.kept_las_round.KeptLasRound`): that
  ranking with each job's side, and the running gangs' protection and free GPUs, fixed up
  from one side-by-side diff of the snapshots, for
  :func:`~jigsaw.policies.speed.kept_gang_round.kept_gang_round`.
- **The booked ledger** (:class:`~jigsaw.policies.speed.kept_ledger.KeptLedger`): every running
  gang stays booked; a round re-books the changed gangs and gets a copy, summed in the order
  a fresh booking sums (float addition is not associative).
- **Answers per record** (:class:`RecordCache`): an answer that depends on one job record
  and the policy's config alone is kept with the record (jigsaw's re-plan candidates).
- **Within a round, shapes that found no place** (:class:`ShapeSkip`): a long queue holds
  many jobs of one shape, and while nothing was booked or unbooked since one of them found
  no place, the next finds none either.

What is kept for jobs that are gone is dropped once it outgrows the running set
(:meth:`RoundMemory.forget_gone`, the plan catalog's footprints included).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any, Generic, TypeVar, TypeVarTuple

from jigsaw.model.cluster import Cluster
from jigsaw.model.domain import Job
from jigsaw.model.snapshot import Snapshot
from jigsaw.policies.shared.fairness import LasConfig, las_order, las_stable_until
from jigsaw.policies.shared.packing import GpuLedger
from jigsaw.policies.shared.plans import Footprint, PlanCatalog
from jigsaw.policies.speed.kept_las_round import KeptLasRound
from jigsaw.policies.speed.kept_ledger import KeptLedger
from jigsaw.policies.speed.las_ranking import LasRanking

T = TypeVar("T")
Ts = TypeVarTuple("Ts")


class RecordCache(Generic[T]):
    """One answer per job, kept while the job's record and the context are the same objects."""

    def __init__(self, *, keep: bool) -> None:
        self._keep = keep
        self._answers: dict[str, tuple[Job, object, T]] = {}

    def get(self, job: Job, context: object, compute: Callable[[Job], T]) -> T:
        """``compute(job)``, for an answer that depends on ``job`` and ``context`` alone."""
        kept = self._answers.get(job.id)
        if kept is not None and kept[0] is job and kept[1] is context:
            return kept[2]
        answer = compute(job)
        if self._keep:
            self._answers[job.id] = (job, context, answer)
        return answer

    def __len__(self) -> int:
        return len(self._answers)

    def forget(self, keep: set[str]) -> None:
        for job_id in [j for j in self._answers if j not in keep]:
            del self._answers[job_id]


class ShapeSkip:
    """One round's job shapes that found no place, each with the ledger's change count then."""

    def __init__(self, ledger: GpuLedger, *, keep: bool) -> None:
        self._ledger = ledger
        self._keep = keep
        self._unplaced: dict[Hashable, int] = {}

    def place(self, shape: Hashable, try_place: Callable[[*Ts], T | None], *args: *Ts) -> T | None:
        """``try_place(*args)``, or None without trying when a job of the same ``shape`` found
        no place and the ledger has not changed since. The caller promises that a place
        depends on the shape and the ledger alone, or on what only takes room away while the
        ledger stays as it is."""
        if not self._keep:
            return try_place(*args)
        changes = self._ledger.changes
        if self._unplaced.get(shape) == changes:
            return None
        placed = try_place(*args)
        # A try that found nothing but booked and unbooked on the way (a preemption it
        # undid) left the ledger the same with a new count: nothing to remember then.
        if placed is None and self._ledger.changes == changes:
            self._unplaced[shape] = changes
        return placed


class RoundMemory:
    """A policy's kept state (see the module docstring)."""

    def __init__(self, *, incremental: bool = True) -> None:
        self.incremental = incremental
        """Keep state across and within rounds (off: work everything out afresh, the
        reference the kept path is tested against)."""
        self._ranking: LasRanking | None = None
        self._las_round: KeptLasRound | None = None
        self._ledger: KeptLedger | None = None
        self._caches: list[RecordCache[Any]] = []

    # -- the LAS ranking --------------------------------------------------------------------
    def las_order(self, jobs: Sequence[Job], now: float, config: LasConfig) -> list[Job]:
        """:func:`~jigsaw.policies.shared.fairness.las_order` of ``jobs``."""
        if not self.incremental:
            return las_order(jobs, now, config)
        return self._las_ranking(config).order(jobs, now)

    def las_stable_until(self, jobs: Sequence[Job], now: float, config: LasConfig) -> float:
        """:func:`~jigsaw.policies.shared.fairness.las_stable_until` of ``jobs``."""
        if not self.incremental:
            return las_stable_until(jobs, now, config)
        return self._las_ranking(config).stable_until(jobs, now)

    def _las_ranking(self, config: LasConfig) -> LasRanking:
        if self._ranking is None or self._ranking.config != config:
            self._ranking = LasRanking(config)
        return self._ranking

    def las_round(self, snapshot: Snapshot, config: LasConfig) -> KeptLasRound:
        """The LAS ranking of ``snapshot``'s jobs and its running gangs (kept state only: a
        caller with ``incremental`` off ranks and walks afresh instead)."""
        kept = self._las_round
        if kept is None or kept.config != config:
            kept = self._las_round = KeptLasRound(config, snapshot.cluster)
        kept.sync(snapshot)
        return kept

    # -- the running gangs' bookings --------------------------------------------------------
    def booked_ledger(
        self,
        cluster: Cluster,
        running: Sequence[Job],
        footprint_of: Callable[[Job], Footprint],
        *,
        threshold: float,
        min_residual: float,
    ) -> tuple[GpuLedger, dict[str, Footprint]]:
        """A ledger of ``cluster`` with every gang of ``running`` booked, for the round to
        change, and each running job's footprint."""
        if not self.incremental:
            ledger = GpuLedger(cluster, threshold=threshold, min_residual=min_residual)
            footprints: dict[str, Footprint] = {}
            for job in running:
                footprint = footprints[job.id] = footprint_of(job)
                ledger.add_all(footprint)
            return ledger, footprints
        kept = self._ledger
        if kept is None or kept.threshold != threshold or kept.min_residual != min_residual:
            kept = self._ledger = KeptLedger(threshold=threshold, min_residual=min_residual)
        return kept.ledger(cluster, running, footprint_of)

    @property
    def rebooked(self) -> int:
        """Gangs the kept ledger booked or unbooked so far (for tests and profiles)."""
        return self._ledger.rebooked if self._ledger is not None else 0

    # -- answers per record, and within a round ---------------------------------------------
    def record_cache(self) -> RecordCache[Any]:
        """A new per-record cache, trimmed with the rest by :meth:`forget_gone`."""
        cache: RecordCache[Any] = RecordCache(keep=self.incremental)
        self._caches.append(cache)
        return cache

    def shape_skip(self, ledger: GpuLedger) -> ShapeSkip:
        """A fresh memory of the shapes that found no place in ``ledger``, for one round."""
        return ShapeSkip(ledger, keep=self.incremental)

    def forget_gone(self, running: Sequence[Job], catalog: PlanCatalog) -> None:
        """Drop what is kept for jobs no longer running once it outgrows the running set."""
        bound = 4 * (len(running) + 64)
        if catalog.cached_footprints > bound or any(len(c) > bound for c in self._caches):
            keep = {job.id for job in running}
            catalog.forget(keep)
            for cache in self._caches:
                cache.forget(keep)
