"""The running gangs of a gang round, kept across rounds (part of
:mod:`jigsaw.policies.speed.round_memory`).

:func:`~jigsaw.policies.shared.gang.gang_round` works out from every running job, every
round, which gangs are protected (started less than ``min_run_s`` ago) and which GPUs are
free. On a full cluster that is a pass over a hundred running jobs and a set difference over
hundreds of GPUs to find the one or two free GPUs. :class:`RunningGangs` keeps both, fixed up
from the running side's changes (:class:`~jigsaw.policies.speed.record_diff.SnapshotDiff`):

- the running jobs ordered by when their run began, so the protected ones are a tail found by
  bisection: ``now - started < min_run_s`` can only turn from false to true as ``started``
  grows (float subtraction is monotone), so the tail is where the reference's own test
  turns, found near ``now - min_run_s`` and checked there;
- per alive GPU, how many workers of running jobs are on it, and per node the alive GPUs
  with none: the free GPUs, as ``alive - union(placements)`` gives them.

A different cluster (a node lost or added) starts a new :class:`RunningGangs`.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from jigsaw.model.cluster import Cluster, GpuId
from jigsaw.model.domain import Job


class RunningGangs:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._alive = cluster.alive_gpus
        self.held: set[str] = set()
        """The running jobs' ids."""
        self._starts: list[float] = []
        """When the run of each running job whose run began began, sorted; the two lists
        below are in step with it."""
        self._ids: list[str] = []
        self._workers: list[int] = []
        self._starting: dict[str, int] = {}
        """Workers of the running jobs whose run has not begun (admitted): protected."""
        self._users: dict[GpuId, int] = {}
        """Alive GPUs with workers of running jobs on them: how many."""
        self._free: dict[int, set[GpuId]] = {}
        """Per node with any, its alive GPUs no running job uses."""
        for gpu in cluster.gpu_ids():
            self._free.setdefault(gpu[0], set()).add(gpu)

    def update(self, added: Sequence[Job], removed: Sequence[Job]) -> None:
        """Records that left the running side (``removed``: each as it was booked), then
        those that joined it (``added``); a job with a new record is in both."""
        for job in removed:
            self._leave(job)
        for job in added:
            self._join(job)

    def protected(self, now: float, min_run_s: float) -> tuple[set[str], int]:
        """The ids of the gangs still starting or started less than ``min_run_s`` before
        ``now`` (a new set, for the caller to add to), and their workers."""
        starts = self._starts
        first = bisect.bisect_right(starts, now - min_run_s)
        # Where ``now - started < min_run_s`` turns true; the float subtraction may round
        # the other way than ``now - min_run_s`` by an ulp: step to the exact turn.
        while first > 0 and now - starts[first - 1] < min_run_s:
            first -= 1
        while first < len(starts) and not now - starts[first] < min_run_s:
            first += 1
        ids = set(self._ids[first:])
        ids.update(self._starting)
        return ids, sum(self._workers[first:]) + sum(self._starting.values())

    def pool(self, victims: Sequence[Job]) -> dict[int, list[GpuId]]:
        """The free GPUs and those ``victims`` free, by node, each node's sorted: what
        ``group_by_node(sorted(free))`` gives in the reference round."""
        alive, free = self._alive, self._free
        freed: dict[int, set[GpuId]] = {}
        for victim in victims:
            for gpu in victim.placement:
                if gpu in alive:
                    node = gpu[0]
                    if node not in freed:
                        freed[node] = set(free.get(node, ()))
                    freed[node].add(gpu)
        pool = {node: sorted(gpus) for node, gpus in free.items() if node not in freed}
        pool.update((node, sorted(gpus)) for node, gpus in freed.items())
        return pool

    def _join(self, job: Job) -> None:
        job_id, workers = job.id, job.spec.workers
        self.held.add(job_id)
        started = job.run_started_at
        if started is None:
            self._starting[job_id] = workers
        else:
            at = bisect.bisect_right(self._starts, started)
            self._starts.insert(at, started)
            self._ids.insert(at, job_id)
            self._workers.insert(at, workers)
        alive, users, free = self._alive, self._users, self._free
        for gpu in job.placement:
            if gpu not in alive:
                continue  # a GPU of a lost node: the reference ignores it too
            count = users.get(gpu, 0)
            users[gpu] = count + 1
            if count == 0:
                node = free[gpu[0]]
                node.discard(gpu)
                if not node:
                    del free[gpu[0]]

    def _leave(self, job: Job) -> None:
        job_id = job.id
        self.held.discard(job_id)
        started = job.run_started_at
        if started is None:
            del self._starting[job_id]
        else:
            at = self._ids.index(job_id, bisect.bisect_left(self._starts, started))
            del self._starts[at]
            del self._ids[at]
            del self._workers[at]
        alive, users, free = self._alive, self._users, self._free
        for gpu in job.placement:
            if gpu not in alive:
                continue
            count = users[gpu] - 1
            if count:
                users[gpu] = count
            else:
                del users[gpu]
                free.setdefault(gpu[0], set()).add(gpu)
