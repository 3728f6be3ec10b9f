"""GPUs for the chosen configurations.

Exclusive and host columns are packed as pollux packs
(:func:`~jigsaw.policies.shared.pollux_placement.pack`): sizes kept keep their GPUs (a host
keeps its size by construction, so its slots stay where they were priced), the rest go
largest first under Pollux's node rules. A guest then takes the slot its column names, if its
host kept those GPUs (it always does unless the cluster lost a node this round).
"""

from __future__ import annotations

from jigsaw.model.cluster import Cluster, GpuId, Placement
from jigsaw.policies.allocator.configurations import GUEST, JobView, Problem
from jigsaw.policies.shared.pollux_placement import PackRequest, pack


def place(problem: Problem, chosen: list[int], cluster: Cluster) -> dict[int, Placement]:
    """Per job index, its GPUs (empty: it waits)."""
    columns, views = problem.columns, problem.views
    sized: list[tuple[int, int, Placement]] = []
    """(job index, GPUs, GPUs it holds as a gang) of every column that takes GPUs whole."""
    for job, index in enumerate(chosen):
        column = columns[index]
        if column.gpus == 0 or column.kind == GUEST:
            continue
        view = views[job]
        sized.append((job, column.gpus, view.current if view.guest_of is None else ()))
    placements: dict[int, Placement] = dict.fromkeys(range(len(views)), ())
    if _all_kept(sized, cluster):
        for job, _, current in sized:
            placements[job] = current
    else:
        requests = [_request(views[job], gpus, current) for job, gpus, current in sized]
        packed = pack(requests, cluster)
        for job, _, _ in sized:  # pack places only these; every other job waits
            placements[job] = packed.get(views[job].job.id, ())
    for job, index in enumerate(chosen):
        column = columns[index]
        if column.kind != GUEST or column.needs is None or column.slot is None:
            continue
        host = columns[column.needs].job
        if column.slot in placements[host]:
            placements[job] = (column.slot,)
    return placements


def _request(view: JobView, gpus: int, current: Placement) -> PackRequest:
    low = gpus if view.goodput is None else view.job.spec.worker_range[0]
    return PackRequest(view.job.id, gpus, current, low)


def _all_kept(sized: list[tuple[int, int, Placement]], cluster: Cluster) -> bool:
    """Whether every gang keeps the GPUs it holds, each does and they are distinct and
    alive: :func:`pack` keeps them all then, so its answer is known without rebuilding the
    cluster's free GPUs (most rounds of a long replay change nothing)."""
    gpus: list[GpuId] = []
    for _, size, current in sized:
        if len(current) != size:
            return False
        gpus.extend(current)
    return len(set(gpus)) == len(gpus) and cluster.alive_gpus.issuperset(gpus)
