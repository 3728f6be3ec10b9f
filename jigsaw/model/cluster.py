"""Cluster inventory: nodes and their GPUs. GPUs are named ``(node index, gpu index)``."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from jigsaw.model.hardware import DEFAULT_GPU_TYPE

GpuId = tuple[int, int]
Placement = tuple[GpuId, ...]
"""One GPU per worker, in rank order. Several workers may name the same GPU when packed."""

DEFAULT_GPU_MEMORY_BYTES = 32 * 2**30


@dataclass(frozen=True, slots=True)
class Node:
    index: int
    name: str
    num_gpus: int
    gpu_memory_bytes: int = DEFAULT_GPU_MEMORY_BYTES
    gpu_type: str = DEFAULT_GPU_TYPE
    alive: bool = True

    def gpu_ids(self) -> Iterator[GpuId]:
        return ((self.index, g) for g in range(self.num_gpus))


@dataclass(frozen=True, slots=True)
class Cluster:
    nodes: tuple[Node, ...] = field(default_factory=tuple)
    _alive_gpu_ids: tuple[GpuId, ...] = field(init=False, repr=False, compare=False)
    """Derived once: the cluster is immutable and every scheduling round asks for it."""
    _alive_gpu_set: frozenset[GpuId] = field(init=False, repr=False, compare=False)
    _every_node_alive: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        alive = tuple(gpu for node in self.nodes if node.alive for gpu in node.gpu_ids())
        object.__setattr__(self, "_alive_gpu_ids", alive)
        object.__setattr__(self, "_alive_gpu_set", frozenset(alive))
        object.__setattr__(self, "_every_node_alive", all(node.alive for node in self.nodes))

    @classmethod
    def uniform(
        cls,
        num_gpus: int,
        gpus_per_node: int,
        *,
        gpu_memory_bytes: int = DEFAULT_GPU_MEMORY_BYTES,
        gpu_type: str = DEFAULT_GPU_TYPE,
    ) -> Cluster:
        if num_gpus < 1 or gpus_per_node < 1:
            raise ValueError("a cluster needs at least one GPU and one GPU per node")
        nodes: list[Node] = []
        remaining = num_gpus
        while remaining > 0:
            count = min(gpus_per_node, remaining)
            index = len(nodes)
            nodes.append(Node(index, f"node-{index}", count, gpu_memory_bytes, gpu_type))
            remaining -= count
        return cls(tuple(nodes))

    @property
    def alive_nodes(self) -> tuple[Node, ...]:
        return tuple(n for n in self.nodes if n.alive)

    @property
    def num_gpus(self) -> int:
        return len(self._alive_gpu_ids)

    def gpu_ids(self) -> list[GpuId]:
        """GPUs of the nodes that are alive, node by node (a fresh list: callers may edit it)."""
        return list(self._alive_gpu_ids)

    @property
    def alive_gpus(self) -> frozenset[GpuId]:
        """The GPUs of :meth:`gpu_ids` as a set (kept: policies test membership every round)."""
        return self._alive_gpu_set

    @property
    def every_node_alive(self) -> bool:
        return self._every_node_alive

    def node(self, index: int) -> Node:
        return self.nodes[index]

    def gpu_memory(self, gpu: GpuId) -> int:
        return self.nodes[gpu[0]].gpu_memory_bytes

    def without_node(self, index: int) -> Cluster:
        """The cluster after node ``index`` is lost (its GPUs leave the inventory)."""
        nodes = tuple(replace(n, alive=False) if n.index == index else n for n in self.nodes)
        return Cluster(nodes)

    def with_node_alive(self, index: int) -> Cluster:
        nodes = tuple(replace(n, alive=True) if n.index == index else n for n in self.nodes)
        return Cluster(nodes)


def per_node_counts(placement: Placement) -> tuple[int, ...]:
    """GPUs per node of a placement, in node order (``((0,0),(0,1),(3,0))`` -> ``(2, 1)``)."""
    counts = Counter(gpu[0] for gpu in set(placement))
    return tuple(counts[node] for node in sorted(counts))
