"""The two halves of a Pollux round: how many GPUs each job gets, then which ones.

**Sizes** (:func:`choose_sizes`). Every job ``j`` has a cost ``c_j(n)`` for each size ``n`` it
may run at (0 = not running), and the round minimises ``sum_j c_j(n_j)`` subject to
``sum_j n_j <= GPUs``. The costs are separable, so dynamic programming over (jobs, GPUs used)
finds the exact optimum in ``O(jobs x GPUs x sizes)``, where Pollux searches the same space
with a genetic algorithm (100 generations of 100 candidates per round).

**Placement** (:func:`pack`). Jobs that keep their size keep their GPUs (a move is a
restart). The others are placed largest first under Pollux's rules: a job of at most one
node's GPUs goes on one node (the fullest that fits); a larger one takes whole free nodes
first, and no node holds two jobs that span several nodes (their all-reduces would share
its network link). A job that no longer fits after that shrinks to what does, or waits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from jigsaw.cluster import Cluster, GpuId, Placement

UNREACHABLE = np.inf


@dataclass(frozen=True, slots=True)
class SizeCosts:
    job_id: str
    costs: NDArray[np.float64]
    """``costs[n]``: the job's share of the objective at ``n`` GPUs (inf: not allowed)."""


def choose_sizes(jobs: Sequence[SizeCosts], capacity: int) -> dict[str, int]:
    """The sizes minimising the summed cost within ``capacity`` GPUs. Every job must allow
    size 0 (finite ``costs[0]``), so a solution always exists."""
    best = np.full(capacity + 1, UNREACHABLE)
    best[0] = 0.0
    used = np.arange(capacity + 1)
    picks = np.zeros((len(jobs), capacity + 1), dtype=np.int64)
    for index, job in enumerate(jobs):
        sizes = np.arange(min(len(job.costs), capacity + 1))
        before = used[:, np.newaxis] - sizes[np.newaxis, :]
        candidates = np.where(
            before >= 0,
            best[np.maximum(before, 0)] + job.costs[np.newaxis, : len(sizes)],
            UNREACHABLE,
        )
        picks[index] = np.argmin(candidates, axis=1)
        best = candidates[used, picks[index]]
    left = int(np.argmin(best))
    chosen: dict[str, int] = {}
    for index in range(len(jobs) - 1, -1, -1):
        size = int(picks[index, left])
        chosen[jobs[index].job_id] = size
        left -= size
    return chosen


@dataclass(frozen=True, slots=True)
class PackRequest:
    job_id: str
    size: int
    current: Placement
    """Where the job runs now (empty: waiting)."""
    min_size: int = 1
    """The fewest GPUs it may shrink to when its size does not fit (below: it waits)."""


def pack(requests: Sequence[PackRequest], cluster: Cluster) -> dict[str, Placement]:
    """A placement for every request of size > 0 that fits (an empty one for the rest).

    Jobs keeping their size keep their GPUs; a shrinking job keeps the part of its GPUs on
    its fullest nodes; a growing job keeps its GPUs reserved until its turn, extends them if
    it can, and falls back to them if its new size does not fit (a move to the same size
    would be a restart for nothing).
    """
    free: dict[int, list[GpuId]] = {
        node.index: list(node.gpu_ids()) for node in cluster.alive_nodes
    }
    spanning: set[int] = set()
    """Nodes that hold a job spanning several nodes."""
    placed: dict[str, Placement] = {}
    live = [r for r in requests if r.size > 0]
    holding = [r for r in live if r.current and _available(r.current, free)]
    for request in holding:
        _take(request.current, free, spanning)
    for request in holding:
        if len(request.current) == request.size:
            placed[request.job_id] = request.current
    for request in holding:
        if request.size < len(request.current):
            _give_back(request.current, free, spanning, placed)
            kept = _subset(request.current, request.size)
            _take(kept, free, spanning)
            placed[request.job_id] = kept
    per_node = max((node.num_gpus for node in cluster.alive_nodes), default=1)
    for request in sorted(
        (r for r in live if r.job_id not in placed), key=lambda r: (-r.size, r.job_id)
    ):
        held = request.current if request in holding else ()
        if held:
            _give_back(held, free, spanning, placed)
        placement: Placement = ()
        for size in range(request.size, max(request.min_size, 1) - 1, -1):
            placement = _extend(held, size, free, spanning, per_node) if held else ()
            placement = placement or _fit(size, free, spanning, per_node)
            if not placement and size == len(held):
                placement = held
            if placement:
                break
        if placement:
            _take(placement, free, spanning)
        placed[request.job_id] = placement
    for request in requests:
        placed.setdefault(request.job_id, ())
    return placed


def _give_back(
    placement: Placement,
    free: dict[int, list[GpuId]],
    spanning: set[int],
    placed: Mapping[str, Placement],
) -> None:
    """Return ``placement``'s GPUs to ``free`` (its nodes stay spanned only if another
    placed job spans them)."""
    for gpu in placement:
        free[gpu[0]].append(gpu)
        free[gpu[0]].sort()
    if len({gpu[0] for gpu in placement}) > 1:
        spanning.clear()
        for other in placed.values():
            if len({gpu[0] for gpu in other}) > 1:
                spanning.update(gpu[0] for gpu in other)


def _subset(placement: Placement, size: int) -> Placement:
    """``size`` of ``placement``'s GPUs, from the nodes where it has the most."""
    by_node: dict[int, list[GpuId]] = {}
    for gpu in placement:
        by_node.setdefault(gpu[0], []).append(gpu)
    ordered = sorted(by_node.values(), key=lambda gpus: (-len(gpus), gpus[0]))
    return tuple(sorted([gpu for gpus in ordered for gpu in gpus][:size]))


def _extend(
    held: Placement, size: int, free: Mapping[int, list[GpuId]], spanning: set[int], per_node: int
) -> Placement:
    """``held`` grown to ``size`` with free GPUs of its own nodes first (empty if the result
    would break the placement rules)."""
    if size < len(held):
        return ()
    nodes = sorted({gpu[0] for gpu in held})
    chosen = list(held)
    for node in nodes:
        chosen.extend(g for g in free[node] if g not in chosen)
    chosen = [g for g in chosen if g in held] + [g for g in chosen if g not in held]
    chosen = chosen[:size]
    if len(chosen) == size and (size > per_node or len({g[0] for g in chosen}) == 1):
        if len({g[0] for g in chosen}) == 1 or not (set(nodes) & spanning):
            return tuple(sorted(chosen))
    return ()


def _available(placement: Placement, free: Mapping[int, list[GpuId]]) -> bool:
    return all(gpu in free.get(gpu[0], ()) for gpu in placement)


def _take(placement: Placement, free: dict[int, list[GpuId]], spanning: set[int]) -> None:
    nodes = {gpu[0] for gpu in placement}
    for gpu in placement:
        free[gpu[0]].remove(gpu)
    if len(nodes) > 1:
        spanning |= nodes


def _fit(
    size: int, free: Mapping[int, list[GpuId]], spanning: set[int], per_node: int
) -> Placement:
    if size <= per_node:
        # The fullest node that still fits the whole job keeps big holes for big jobs.
        fitting = [(len(gpus), node) for node, gpus in free.items() if len(gpus) >= size]
        if fitting:
            _, node = min(fitting)
            return tuple(free[node][:size])
    # Across nodes: only nodes no other spanning job uses; emptiest first.
    open_nodes = sorted(
        ((len(gpus), node) for node, gpus in free.items() if gpus and node not in spanning),
        key=lambda item: (-item[0], item[1]),
    )
    chosen: list[GpuId] = []
    for count, node in open_nodes:
        chosen.extend(free[node][: min(count, size - len(chosen))])
        if len(chosen) == size:
            return tuple(sorted(chosen))
    return ()
