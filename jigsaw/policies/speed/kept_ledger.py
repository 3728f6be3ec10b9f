"""The GPU ledger of the running gangs kept across rounds (part of
:mod:`jigsaw.policies.speed.round_memory`).

Each round, the gangs whose record is new since the last round are looked at: a gang that is
new, whose footprint changed (a re-plan, a new placement, an edit), or that is gone
(finished, preempted, cancelled, failed: whatever the reason, it is just absent) is unbooked
or booked, and only the GPUs those gangs touch are summed again. The round then gets a copy
it may change freely.

The copy is exactly the ledger a fresh booking in ``running`` order would give, so decisions
do not change:

- a GPU's load is summed in that order (float addition is not associative): each GPU keeps
  its bookings sorted by (submit time, job id, index in the footprint), which is the order in
  which :meth:`~jigsaw.model.snapshot.Snapshot.build` lists running jobs;
- the partial GPUs are listed in the order of their first booking, as a fresh ledger's
  insertion-ordered index lists them;
- free GPUs are listed per node in the cluster's order.

A different cluster (a node lost or added) or different thresholds start from empty.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence

from jigsaw.model.cluster import Cluster, GpuId
from jigsaw.model.domain import Job
from jigsaw.model.numerics import LOAD_EPS
from jigsaw.policies.shared.packing import GpuLedger
from jigsaw.policies.shared.plans import Footprint
from jigsaw.policies.speed.record_diff import record_diff

_Order = tuple[float, str, int]
"""Where a booking falls in a fresh ledger's sequence: (submit time, job id, index)."""


class KeptLedger:
    def __init__(self, *, threshold: float, min_residual: float) -> None:
        self.threshold = threshold
        self.min_residual = min_residual
        self._cluster: Cluster | None = None
        self._gangs: dict[str, tuple[float, Footprint]] = {}
        """Per booked job: its submit time and the footprint booked."""
        self._footprints: dict[str, Footprint] = {}
        self._seen: Mapping[int, Job] = {}
        """The last round's running job objects by ``id()``; holding them keeps ids unique."""
        self._bookings: dict[GpuId, list[tuple[_Order, float, int]]] = {}
        self._node_gpus: dict[int, tuple[GpuId, ...]] = {}
        self._load: dict[GpuId, float] = {}
        self._memory_used: dict[GpuId, int] = {}
        self._memory_total: dict[GpuId, int] = {}
        self._workers: dict[GpuId, int] = {}
        self._free_by_node: dict[int, list[GpuId]] = {}
        self._partial: list[tuple[_Order, GpuId]] = []
        """Partial GPUs sorted by their first booking."""
        self._partial_at: dict[GpuId, _Order] = {}
        self.rebooked = 0
        """Gangs booked or unbooked so far (for tests and profiles)."""

    def ledger(
        self, cluster: Cluster, running: Sequence[Job], footprint_of: Callable[[Job], Footprint]
    ) -> tuple[GpuLedger, dict[str, Footprint]]:
        """A ledger with every gang of ``running`` booked, for this round to change, and
        each running job's footprint."""
        try:
            return self._ledger(cluster, running, footprint_of)
        except Exception:
            self._cluster = None  # half fixed up (a job the oracle cannot price): start over
            raise

    def _ledger(
        self, cluster: Cluster, running: Sequence[Job], footprint_of: Callable[[Job], Footprint]
    ) -> tuple[GpuLedger, dict[str, Footprint]]:
        if self._cluster is not cluster and self._cluster != cluster:
            self._reset(cluster)
        gangs = self._gangs
        touched: set[GpuId] = set()
        seen, added, gone = record_diff(self._seen, running)
        for job_id in gone:
            if job_id in gangs:
                self._unbook(job_id, touched)
        for job in added:
            footprint = footprint_of(job)
            booked = gangs.get(job.id)
            if (
                booked is not None
                and booked[0] == job.submitted_at
                and (booked[1] is footprint or booked[1] == footprint)
            ):
                continue
            if booked is not None:
                self._unbook(job.id, touched)
            self._book(job, footprint, touched)
        self._seen = seen
        for gpu in touched:
            self._recount(gpu)
        for node in {gpu[0] for gpu in touched}:
            self._free_by_node[node] = [g for g in self._node_gpus[node] if not self._workers[g]]
        return self._copy(), dict(self._footprints)

    # -- bookings ---------------------------------------------------------------------------
    def _book(self, job: Job, footprint: Footprint, touched: set[GpuId]) -> None:
        self.rebooked += 1
        self._gangs[job.id] = (job.submitted_at, footprint)
        self._footprints[job.id] = footprint
        for index, (gpu, load, memory) in enumerate(footprint):
            bookings = self._bookings.get(gpu)
            if bookings is None:
                continue  # a GPU of a lost node: a fresh ledger ignores it too
            bisect.insort(bookings, ((job.submitted_at, job.id, index), load, memory))
            touched.add(gpu)

    def _unbook(self, job_id: str, touched: set[GpuId]) -> None:
        self.rebooked += 1
        submitted_at, footprint = self._gangs.pop(job_id)
        del self._footprints[job_id]
        for index, (gpu, _, _) in enumerate(footprint):
            bookings = self._bookings.get(gpu)
            if bookings is None:
                continue
            order = (submitted_at, job_id, index)
            at = bisect.bisect_left(bookings, (order,))
            assert bookings[at][0] == order, "kept ledger lost a booking"
            del bookings[at]
            touched.add(gpu)

    def _recount(self, gpu: GpuId) -> None:
        """The GPU's totals as a fresh ledger sums them, and its place in the partial index."""
        bookings = self._bookings[gpu]
        load, memory = 0.0, 0
        for _, booked_load, booked_memory in bookings:
            load += booked_load
            memory += booked_memory
        self._load[gpu], self._memory_used[gpu] = load, memory
        self._workers[gpu] = len(bookings)
        old = self._partial_at.pop(gpu, None)
        if old is not None:
            at = bisect.bisect_left(self._partial, (old, gpu))
            del self._partial[at]
        if bookings and self.threshold - load >= self.min_residual - LOAD_EPS:
            first = bookings[0][0]
            self._partial_at[gpu] = first
            bisect.insort(self._partial, (first, gpu))

    # -- the round's copy -------------------------------------------------------------------
    def _copy(self) -> GpuLedger:
        free_by_node = {node: list(gpus) for node, gpus in self._free_by_node.items()}
        return GpuLedger.from_parts(
            threshold=self.threshold,
            min_residual=self.min_residual,
            load=dict(self._load),
            memory_used=dict(self._memory_used),
            memory_total=self._memory_total,
            workers=dict(self._workers),
            free_by_node=free_by_node,
            partial=dict.fromkeys(gpu for _, gpu in self._partial),
            num_free=sum(len(gpus) for gpus in free_by_node.values()),
        )

    def _reset(self, cluster: Cluster) -> None:
        self._cluster = cluster
        self._gangs.clear()
        self._footprints.clear()
        self._seen = {}
        self._bookings.clear()
        self._node_gpus.clear()
        self._load.clear()
        self._memory_used.clear()
        self._memory_total = {}
        self._workers.clear()
        self._free_by_node.clear()
        self._partial.clear()
        self._partial_at.clear()
        for node in cluster.alive_nodes:
            gpus = tuple(node.gpu_ids())
            self._node_gpus[node.index] = gpus
            self._free_by_node[node.index] = list(gpus)
            for gpu in gpus:
                self._bookings[gpu] = []
                self._load[gpu] = 0.0
                self._memory_used[gpu] = 0
                self._memory_total[gpu] = node.gpu_memory_bytes
                self._workers[gpu] = 0
