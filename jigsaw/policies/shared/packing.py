"""Per-round GPU ledger for packing: summed predicted load and memory of every GPU.

A GPU is *free* when no worker is on it, *partial* when it has workers and at least
``min_residual`` of its load budget left, *full* otherwise. Free GPUs are indexed by node
(for compact gang placement) and partial GPUs in one insertion-ordered set (for packing),
so finding room costs O(nodes + partial GPUs), never O(jobs x GPUs).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from jigsaw.model.cluster import Cluster, GpuId, Placement
from jigsaw.policies.shared.placement import compact_placement

_EPS = 1e-9


class GpuLedger:
    def __init__(self, cluster: Cluster, *, threshold: float = 1.0, min_residual: float = 0.2):
        self.threshold = threshold
        self.min_residual = min_residual
        self.load: dict[GpuId, float] = {}
        self.memory_used: dict[GpuId, int] = {}
        self.memory_total: dict[GpuId, int] = {}
        self.workers: dict[GpuId, int] = {}
        self.free_by_node: dict[int, list[GpuId]] = {}
        for node in cluster.alive_nodes:
            gpus = list(node.gpu_ids())
            self.free_by_node[node.index] = gpus
            for gpu in gpus:
                self.load[gpu] = 0.0
                self.memory_used[gpu] = 0
                self.memory_total[gpu] = node.gpu_memory_bytes
                self.workers[gpu] = 0
        self.partial: dict[GpuId, None] = {}
        self.num_free = len(self.load)
        self.nodes_with_free: set[int] = {node for node, gpus in self.free_by_node.items() if gpus}
        """The nodes whose free list is not empty: a nearly full cluster, where packing is
        tried, has few, and the searches below look at those only."""
        self.changes = 0
        """How many bookings were added or removed so far: equal counts, same ledger."""
        self._no_room: dict[tuple[tuple[float, ...], tuple[int, ...], int], int] = {}

    @classmethod
    def from_parts(
        cls,
        *,
        threshold: float,
        min_residual: float,
        load: dict[GpuId, float],
        memory_used: dict[GpuId, int],
        memory_total: dict[GpuId, int],
        workers: dict[GpuId, int],
        free_by_node: dict[int, list[GpuId]],
        partial: dict[GpuId, None],
        num_free: int,
    ) -> GpuLedger:
        """A ledger over state booked elsewhere (:mod:`jigsaw.policies.speed.kept_ledger`); it owns
        the containers it is given, except ``memory_total``, which it only reads."""
        ledger = cls.__new__(cls)
        ledger.threshold, ledger.min_residual = threshold, min_residual
        ledger.load, ledger.memory_used, ledger.memory_total = load, memory_used, memory_total
        ledger.workers, ledger.free_by_node = workers, free_by_node
        ledger.partial, ledger.num_free = partial, num_free
        ledger.nodes_with_free = {node for node, gpus in free_by_node.items() if gpus}
        ledger.changes = 0
        ledger._no_room = {}
        return ledger

    # -- bookkeeping ------------------------------------------------------------------------
    def add(self, gpu: GpuId, load: float, memory: int) -> None:
        if gpu not in self.load:
            return  # a GPU of a lost node: the cycle retries that job, nothing to count
        self.changes += 1
        if self.workers[gpu] == 0:
            free = self.free_by_node[gpu[0]]
            free.remove(gpu)
            if not free:
                self.nodes_with_free.discard(gpu[0])
            self.num_free -= 1
        self.workers[gpu] += 1
        self.load[gpu] += load
        self.memory_used[gpu] += memory
        self._reindex(gpu)

    def remove(self, gpu: GpuId, load: float, memory: int) -> None:
        if gpu not in self.load:
            return
        self.changes += 1
        self.workers[gpu] -= 1
        self.load[gpu] = max(self.load[gpu] - load, 0.0)
        self.memory_used[gpu] -= memory
        if self.workers[gpu] == 0:
            self.load[gpu] = 0.0
            self.memory_used[gpu] = 0
            self.partial.pop(gpu, None)
            free = self.free_by_node[gpu[0]]
            free.append(gpu)
            free.sort()
            self.nodes_with_free.add(gpu[0])
            self.num_free += 1
        else:
            self._reindex(gpu)

    def add_all(self, items: Iterable[tuple[GpuId, float, int]]) -> None:
        for gpu, load, memory in items:
            self.add(gpu, load, memory)

    def remove_all(self, items: Iterable[tuple[GpuId, float, int]]) -> None:
        for gpu, load, memory in items:
            self.remove(gpu, load, memory)

    def fits(self, gpu: GpuId, load: float, memory: int) -> bool:
        return (
            self.load[gpu] + load <= self.threshold + _EPS
            and self.memory_used[gpu] + memory <= self.memory_total[gpu]
        )

    def fits_instead(
        self, old: Iterable[tuple[GpuId, float, int]], new: Iterable[tuple[GpuId, float, int]]
    ) -> bool:
        """Whether ``new`` fits where ``old`` is booked, once ``old`` is taken off: what
        :meth:`remove_all` of ``old`` and then :meth:`fits` of every entry of ``new`` would
        say (the same float operations), without changing the ledger."""
        own = {gpu: (load, memory) for gpu, load, memory in old}
        for gpu, load, memory in new:
            if gpu not in self.load:
                return False
            booked, used = self.load[gpu], self.memory_used[gpu]
            if gpu in own:
                if self.workers[gpu] == 1:
                    booked, used = 0.0, 0
                else:
                    booked = max(booked - own[gpu][0], 0.0)
                    used -= own[gpu][1]
            if booked + load > self.threshold + _EPS or used + memory > self.memory_total[gpu]:
                return False
        return True

    def overcommitted(self) -> list[GpuId]:
        return [
            gpu
            for gpu in self.load
            if self.load[gpu] > self.threshold + _EPS
            or self.memory_used[gpu] > self.memory_total[gpu]
        ]

    # -- finding room -----------------------------------------------------------------------
    def exclusive(self, workers: int) -> Placement | None:
        """A compact placement on free GPUs (one node if any fits), or None."""
        if workers > self.num_free:
            return None
        # compact_placement's choice does not depend on the dict's order.
        return compact_placement({n: self.free_by_node[n] for n in self.nodes_with_free}, workers)

    def packed(
        self, loads: Sequence[float], memories: Sequence[int], *, max_scan: int = 256
    ) -> Placement | None:
        """Place worker r (load ``loads[r]``, memory ``memories[r]``) on a GPU where it fits.

        Heaviest workers first. A worker goes to the partial GPU it fills best (on a node
        the gang already uses when possible), else to a free GPU, preferring the gang's
        nodes. Never two workers of one gang on one GPU. All or nothing.

        A search that found no room is remembered until the ledger next changes: a round
        asks again for every waiting gang of the same shape, and the answer is the same.
        """
        key = (tuple(loads), tuple(memories), max_scan)
        if self._no_room.get(key) == self.changes:
            return None
        placement = self._search(loads, memories, max_scan)
        if placement is None:
            self._no_room[key] = self.changes
        return placement

    def _search(
        self, loads: Sequence[float], memories: Sequence[int], max_scan: int
    ) -> Placement | None:
        order = sorted(range(len(loads)), key=lambda r: (-loads[r], r))
        chosen: dict[int, GpuId] = {}
        used: set[GpuId] = set()
        nodes: set[int] = set()
        taken_free: dict[int, int] = {}
        partial = list(self.partial)[:max_scan]
        for rank in order:
            load, memory = loads[rank], memories[rank]
            best: GpuId | None = None
            best_key: tuple[int, float] | None = None
            if load <= self.threshold - self.min_residual + _EPS:
                for gpu in partial:
                    if gpu in used or not self.fits(gpu, load, memory):
                        continue
                    key = (0 if gpu[0] in nodes else 1, self.threshold - self.load[gpu] - load)
                    if best_key is None or key < best_key:
                        best, best_key = gpu, key
            if best is None:
                best = self._free_gpu(nodes, taken_free, memory)
            if best is None:
                return None
            chosen[rank] = best
            used.add(best)
            nodes.add(best[0])
        return tuple(chosen[rank] for rank in range(len(loads)))

    def _free_gpu(self, nodes: set[int], taken: dict[int, int], memory: int) -> GpuId | None:
        candidates = [n for n in nodes if len(self.free_by_node.get(n, ())) > taken.get(n, 0)]
        if not candidates:
            free_by_node = self.free_by_node
            candidates = [n for n in self.nodes_with_free if len(free_by_node[n]) > taken.get(n, 0)]
            if not candidates:
                return None
            # Start a new node where the most free GPUs are: the gang's next workers follow.
            candidates = [max(candidates, key=lambda n: (len(self.free_by_node[n]), -n))]
        node = min(candidates)
        gpu = self.free_by_node[node][taken.get(node, 0)]
        if memory > self.memory_total[gpu]:
            return None
        taken[node] = taken.get(node, 0) + 1
        return gpu

    def _reindex(self, gpu: GpuId) -> None:
        if self.threshold - self.load[gpu] >= self.min_residual - _EPS:
            self.partial[gpu] = None
        else:
            self.partial.pop(gpu, None)
