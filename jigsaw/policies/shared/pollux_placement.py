"""The second half of a Pollux round: which GPUs each job gets, once its size is chosen
(:mod:`~jigsaw.policies.shared.pollux_allocation` chooses the sizes).

Jobs that keep their size keep their GPUs (a move is a restart). The others are placed
largest first under Pollux's rules: a job of at most one node's GPUs goes on one node (the
fullest that fits); a larger one takes whole free nodes first, and no node holds two jobs
that span several nodes (their all-reduces would share its network link). A job that no
longer fits after that shrinks to what does, or waits.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from itertools import chain
from typing import NamedTuple

from jigsaw.model.cluster import Cluster, GpuId, Placement


class PackRequest(NamedTuple):
    """Immutable; a tuple, since a round builds one per gang (a frozen dataclass's
    constructor cost more than the rest of a kept gang's placing)."""

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
    placed: dict[str, Placement] = {}
    live = [r for r in requests if r.size > 0]
    # A job holds its GPUs while they are alive and no earlier job holds one of them (a
    # job that shares a GPU with an earlier one is placed afresh, as a waiting job is).
    alive = cluster.alive_gpus
    taken: set[GpuId] = set()
    holding: list[PackRequest] = []
    for request in live:
        if request.current and alive.issuperset(request.current):
            if taken.isdisjoint(request.current):
                holding.append(request)
                taken.update(request.current)
    gpus = _Gpus(cluster, taken)
    held_by = {request.job_id for request in holding}
    for request in holding:
        gpus.note_spanning(request.current)
    for request in holding:
        if len(request.current) == request.size:
            placed[request.job_id] = request.current
        elif request.size < len(request.current):
            gpus.give_back(request.current)
            placed[request.job_id] = gpus.take(_subset(request.current, request.size))
    for request in sorted(
        (r for r in live if r.job_id not in placed), key=lambda r: (-r.size, r.job_id)
    ):
        held = request.current if request.job_id in held_by else ()
        if held:
            gpus.give_back(held)
        placement: Placement = ()
        for size in range(request.size, max(request.min_size, 1) - 1, -1):
            placement = (gpus.extend(held, size) if held else ()) or gpus.fit(size)
            if not placement and size == len(held):
                placement = held
            if placement:
                break
        placed[request.job_id] = gpus.take(placement) if placement else ()
    return {r.job_id: placed.get(r.job_id, ()) for r in requests}


def pack_starts(
    kept: Sequence[Placement],
    starts: Sequence[PackRequest],
    cluster: Cluster,
    taken: set[GpuId] | None = None,
) -> dict[str, Placement]:
    """:func:`pack`'s answer for the ``starts`` (requests that hold no GPUs) when every other
    job keeps exactly the GPUs it holds (``kept``: distinct and alive, so each holds them in
    :func:`pack` too), without a request per kept job: the kept ones hold theirs and the
    starts are placed as :func:`pack` places them, largest first (a round that starts a few
    jobs beside hundreds kept reads only the few). ``taken``: the kept GPUs as a set, where
    the caller has it."""
    if taken is None:
        taken = set(chain.from_iterable(kept))
    gpus = _Gpus(cluster, taken)
    for current in kept:
        if len(current) > 1:  # one GPU spans no nodes
            gpus.note_spanning(current)
    placed: dict[str, Placement] = {}
    for request in sorted((r for r in starts if r.size > 0), key=lambda r: (-r.size, r.job_id)):
        placement: Placement = ()
        for size in range(request.size, max(request.min_size, 1) - 1, -1):
            placement = gpus.fit(size)
            if placement:
                break
        placed[request.job_id] = gpus.take(placement) if placement else ()
    return {r.job_id: placed.get(r.job_id, ()) for r in starts}


def _subset(placement: Placement, size: int) -> Placement:
    """``size`` of ``placement``'s GPUs, from the nodes where it has the most."""
    by_node: dict[int, list[GpuId]] = {}
    for gpu in placement:
        by_node.setdefault(gpu[0], []).append(gpu)
    ordered = sorted(by_node.values(), key=lambda gpus: (-len(gpus), gpus[0]))
    return tuple(sorted([gpu for gpus in ordered for gpu in gpus][:size]))


class _Gpus:
    """Free GPUs per node, and how many jobs spanning several nodes each node holds."""

    def __init__(self, cluster: Cluster, taken: set[GpuId]) -> None:
        """The alive GPUs less ``taken`` (the jobs that hold theirs; each then tells
        :meth:`note_spanning` where it runs)."""
        nodes = cluster.alive_nodes
        # The alive GPUs less ``taken``, node by node, each node's in order (a GPU id is
        # (node, index): sorted, they come so); a busy cluster has few.
        self.free: dict[int, list[GpuId]] = {node.index: [] for node in nodes}
        for gpu in sorted(cluster.alive_gpus.difference(taken)):
            self.free[gpu[0]].append(gpu)
        self.per_node = max((node.num_gpus for node in nodes), default=1)
        self.spanning: Counter[int] = Counter()

    def take(self, placement: Placement) -> Placement:
        for gpu in placement:
            self.free[gpu[0]].remove(gpu)
        self.note_spanning(placement)
        return placement

    def note_spanning(self, placement: Placement) -> None:
        """A job of ``placement`` holds its GPUs: count it on each node, if it spans several."""
        nodes = {gpu[0] for gpu in placement}
        if len(nodes) > 1:
            self.spanning.update(nodes)

    def give_back(self, placement: Placement) -> None:
        for gpu in placement:
            self.free[gpu[0]].append(gpu)
            self.free[gpu[0]].sort()
        nodes = {gpu[0] for gpu in placement}
        if len(nodes) > 1:
            self.spanning.subtract(nodes)

    def extend(self, held: Placement, size: int) -> Placement:
        """``held`` grown to ``size`` with the free GPUs of its own nodes (the job stays
        where it was): empty when they are too few, or when the result would span nodes
        another spanning job uses, or a job of one node's size would span nodes."""
        nodes = sorted({gpu[0] for gpu in held})
        grown = list(held) + [g for node in nodes for g in self.free[node] if g not in held]
        if size < len(held) or len(grown) < size:
            return ()
        chosen = grown[:size]
        used = {gpu[0] for gpu in chosen}
        if len(used) > 1 and (size <= self.per_node or any(self.spanning[n] for n in used)):
            return ()
        return tuple(sorted(chosen))

    def fit(self, size: int) -> Placement:
        if size <= self.per_node:
            # The fullest node that still fits the whole job keeps big holes for big jobs.
            fitting = [(len(gpus), node) for node, gpus in self.free.items() if len(gpus) >= size]
            if fitting:
                _, node = min(fitting)
                return tuple(self.free[node][:size])
        # Across nodes: only nodes no other spanning job uses; emptiest first.
        open_nodes = sorted(
            (node for node, gpus in self.free.items() if gpus and not self.spanning[node]),
            key=lambda node: (-len(self.free[node]), node),
        )
        chosen: list[GpuId] = []
        for node in open_nodes:
            chosen.extend(self.free[node][: size - len(chosen)])
            if len(chosen) == size:
                return tuple(sorted(chosen))
        return ()
