"""Choosing GPUs for a gang: compact first, so a job spans as few nodes as it can."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from jigsaw.model.cluster import GpuId, Placement


def group_by_node(gpus: Iterable[GpuId]) -> dict[int, list[GpuId]]:
    by_node: dict[int, list[GpuId]] = defaultdict(list)
    for gpu in gpus:
        by_node[gpu[0]].append(gpu)
    return by_node


def compact_placement(free_by_node: dict[int, list[GpuId]], workers: int) -> Placement | None:
    """Pick ``workers`` free GPUs, all-or-nothing.

    One node when any node fits (best fit: the fullest node that still fits, which keeps big
    holes for big gangs); otherwise the fewest nodes, largest free sets first.
    """
    fitting = [(len(gpus), node) for node, gpus in free_by_node.items() if len(gpus) >= workers]
    if fitting:
        _, node = min(fitting)
        return tuple(sorted(free_by_node[node])[:workers])
    if sum(len(g) for g in free_by_node.values()) < workers:
        return None
    chosen: list[GpuId] = []
    for node in sorted(free_by_node, key=lambda n: (-len(free_by_node[n]), n)):
        chosen.extend(sorted(free_by_node[node])[: workers - len(chosen)])
        if len(chosen) == workers:
            break
    return tuple(chosen)


def take(free_by_node: dict[int, list[GpuId]], placement: Placement) -> None:
    """Remove a chosen placement's GPUs from the free pool in place."""
    used = set(placement)
    for node in {gpu[0] for gpu in placement}:
        free_by_node[node] = [g for g in free_by_node[node] if g not in used]
        if not free_by_node[node]:
            del free_by_node[node]
