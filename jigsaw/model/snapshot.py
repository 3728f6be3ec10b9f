"""A read-only picture of the world that a policy decides from."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain, filterfalse
from operator import attrgetter
from types import MappingProxyType

from jigsaw.model.cluster import Cluster, GpuId
from jigsaw.model.domain import Job
from jigsaw.model.lifecycle import JobState

_ARRIVAL_ORDER = attrgetter("submitted_at", "id")
_PLACEMENT = attrgetter("placement")
# Bound once: :meth:`Snapshot.build` tests every active job against them in every cycle.
_RUNNING, _ADMITTED = JobState.RUNNING, JobState.ADMITTED
_PENDING, _PREEMPTED, _RETRYING = JobState.PENDING, JobState.PREEMPTED, JobState.RETRYING


@dataclass(frozen=True, slots=True)
class Snapshot:
    now: float
    cluster: Cluster
    waiting: tuple[Job, ...]
    """PENDING, PREEMPTED and RETRYING jobs whose back-off has elapsed, oldest first."""
    running: tuple[Job, ...]
    """ADMITTED and RUNNING jobs: they hold their placement."""
    next_retry_at: float | None = None
    """The earliest back-off end among waiting jobs held back by it (absent from ``waiting``
    until then); None when no job is backing off."""

    @classmethod
    def from_sides(
        cls,
        now: float,
        cluster: Cluster,
        holding: Sequence[Job],
        waiting: Sequence[Job],
        backing_off: bool,
    ) -> Snapshot:
        """The snapshot of jobs already split by side, each side in arrival order, as the
        store keeps them (:meth:`~jigsaw.scheduling.seams.Store.active_sides`): the same
        snapshot :meth:`build` gives, without a walk or a sort per round unless some waiting
        job is ``backing_off``."""
        if not backing_off:
            return cls(now, cluster, tuple(waiting), tuple(holding), None)
        ready: list[Job] = []
        next_retry_at: float | None = None
        for job in waiting:
            retry_after = job.retry_after
            if retry_after is None or retry_after <= now:
                ready.append(job)
            elif next_retry_at is None or retry_after < next_retry_at:
                next_retry_at = retry_after
        return cls(now, cluster, tuple(ready), tuple(holding), next_retry_at)

    @classmethod
    def build(cls, now: float, cluster: Cluster, jobs: Iterable[Job]) -> Snapshot:
        waiting: list[Job] = []
        running: list[Job] = []
        next_retry_at: float | None = None
        hold, wait = running.append, waiting.append
        for job in jobs:
            state = job.state
            if state is _RUNNING or state is _ADMITTED:
                hold(job)
            elif state is _PENDING or state is _PREEMPTED or state is _RETRYING:
                retry_after = job.retry_after
                if retry_after is None or retry_after <= now:
                    wait(job)
                elif next_retry_at is None or retry_after < next_retry_at:
                    next_retry_at = retry_after
        waiting.sort(key=_ARRIVAL_ORDER)
        running.sort(key=_ARRIVAL_ORDER)
        return cls(now, cluster, tuple(waiting), tuple(running), next_retry_at)

    @property
    def occupants(self) -> Mapping[GpuId, tuple[tuple[str, int], ...]]:
        """Per GPU of a live node, the (job id, rank) pairs placed on it. Computed on demand:
        most policies need only :meth:`free_gpus`."""
        occupants: dict[GpuId, list[tuple[str, int]]] = {gpu: [] for gpu in self.cluster.gpu_ids()}
        for job in self.running:
            for rank, gpu in enumerate(job.placement):
                if gpu in occupants:
                    occupants[gpu].append((job.id, rank))
        return MappingProxyType({gpu: tuple(occ) for gpu, occ in occupants.items()})

    def free_gpus(self) -> list[GpuId]:
        """GPUs with no worker on them, of nodes that are alive, in a stable order."""
        # The same sets as comprehensions would build, walked in C: it runs every round.
        used = set(chain.from_iterable(map(_PLACEMENT, self.running)))
        return list(filterfalse(used.__contains__, self.cluster.gpu_ids()))
