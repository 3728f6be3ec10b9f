"""A read-only picture of the world that a policy decides from."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from operator import attrgetter
from types import MappingProxyType

from jigsaw.cluster import Cluster, GpuId
from jigsaw.domain import Job
from jigsaw.lifecycle import JobState

_ARRIVAL_ORDER = attrgetter("submitted_at", "id")


@dataclass(frozen=True, slots=True)
class Snapshot:
    now: float
    cluster: Cluster
    waiting: tuple[Job, ...]
    """PENDING, PREEMPTED and RETRYING jobs whose back-off has elapsed, oldest first."""
    running: tuple[Job, ...]
    """ADMITTED and RUNNING jobs: they hold their placement."""
    occupants: Mapping[GpuId, tuple[tuple[str, int], ...]]
    """Per GPU, the (job id, rank) pairs placed on it. GPUs of lost nodes are absent."""

    @classmethod
    def build(cls, now: float, cluster: Cluster, jobs: Iterable[Job]) -> Snapshot:
        waiting: list[Job] = []
        running: list[Job] = []
        occupants: dict[GpuId, list[tuple[str, int]]] = {gpu: [] for gpu in cluster.gpu_ids()}
        # Identity tests, not the JobState properties: this loop runs over every active job
        # in every cycle, and the simulator's cycles number in the hundreds of thousands.
        for job in jobs:
            state = job.state
            if state is JobState.RUNNING or state is JobState.ADMITTED:
                running.append(job)
                for rank, gpu in enumerate(job.placement):
                    occupants.setdefault(gpu, []).append((job.id, rank))
            elif (
                state is JobState.PENDING
                or state is JobState.PREEMPTED
                or state is JobState.RETRYING
            ) and (not job.extra or float(job.extra.get("retry_after", 0.0)) <= now):
                waiting.append(job)
        waiting.sort(key=_ARRIVAL_ORDER)
        running.sort(key=_ARRIVAL_ORDER)
        frozen = {gpu: tuple(occ) for gpu, occ in occupants.items()}
        return cls(now, cluster, tuple(waiting), tuple(running), MappingProxyType(frozen))

    def free_gpus(self) -> list[GpuId]:
        """GPUs with no worker on them, of nodes that are alive, in a stable order."""
        alive = {node.index for node in self.cluster.alive_nodes}
        return sorted(gpu for gpu, occ in self.occupants.items() if not occ and gpu[0] in alive)

    def lost_placements(self) -> list[Job]:
        """Running jobs with a worker on a GPU that is no longer in the cluster."""
        alive = {node.index for node in self.cluster.alive_nodes}
        return [job for job in self.running if any(g[0] not in alive for g in job.placement)]
