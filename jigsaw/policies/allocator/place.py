"""GPUs for the chosen configurations.

Exclusive and host columns are packed as pollux packs
(:func:`~jigsaw.policies.shared.pollux_placement.pack`): sizes kept keep their GPUs (a host
keeps its size by construction, so its slots stay where they were priced), the rest go
largest first under Pollux's node rules. A guest then takes the slot its column names, if its
host kept those GPUs (it always does unless the cluster lost a node this round).
"""

from __future__ import annotations

from jigsaw.model.cluster import Cluster, Placement
from jigsaw.policies.allocator.configurations import GUEST, Problem
from jigsaw.policies.shared.pollux_placement import PackRequest, pack


def place(problem: Problem, chosen: list[int], cluster: Cluster) -> dict[int, Placement]:
    """Per job index, its GPUs (empty: it waits)."""
    requests: list[PackRequest] = []
    for job, index in enumerate(chosen):
        column = problem.columns[index]
        view = problem.views[job]
        if column.kind == GUEST or column.gpus == 0:
            continue
        current = view.current if view.guest_of is None else ()
        low = column.gpus if view.goodput is None else view.job.spec.worker_range[0]
        requests.append(PackRequest(view.job.id, column.gpus, current, min_size=low))
    packed = _kept(requests, cluster)
    if packed is None:
        packed = pack(requests, cluster)
    placements: dict[int, Placement] = {
        job: packed.get(view.job.id, ()) for job, view in enumerate(problem.views)
    }
    for job, index in enumerate(chosen):
        column = problem.columns[index]
        if column.kind != GUEST or column.needs is None or column.slot is None:
            continue
        host = problem.columns[column.needs].job
        if column.slot in placements[host]:
            placements[job] = (column.slot,)
    return placements


def _kept(requests: list[PackRequest], cluster: Cluster) -> dict[str, Placement] | None:
    """Every request keeping the GPUs it holds, when each does and they are distinct and
    alive: what :func:`pack` returns then, without rebuilding the cluster's free GPUs (most
    rounds of a long replay change nothing). ``None``: pack them."""
    held: list[Placement] = []
    for request in requests:
        if len(request.current) != request.size:
            return None
        held.append(request.current)
    gpus = [gpu for placement in held for gpu in placement]
    alive = {gpu for node in cluster.alive_nodes for gpu in node.gpu_ids()}
    if len(set(gpus)) != len(gpus) or not alive.issuperset(gpus):
        return None
    return {request.job_id: request.current for request in requests}
