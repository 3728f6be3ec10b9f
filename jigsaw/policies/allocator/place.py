"""GPUs for the chosen configurations.

Exclusive and host columns are packed as pollux packs
(:func:`~jigsaw.policies.shared.pollux_placement.pack`): sizes kept keep their GPUs (a host
keeps its size by construction, so its slots stay where they were priced), the rest go
largest first under Pollux's node rules (in a round where every gang keeps exactly its GPUs and
the rest start, only the starts are placed: :func:`~jigsaw.policies.shared.
pollux_placement.pack_starts`, the same answer). A guest then takes the slot its column
names, if its host kept those GPUs (it always does unless the cluster lost a node this
round).
"""

from __future__ import annotations

from jigsaw.model.cluster import Cluster, GpuId, Placement
from jigsaw.policies.allocator.configurations import GUEST, JobView, Problem
from jigsaw.policies.shared.pollux_placement import PackRequest, pack, pack_starts


def place(problem: Problem, chosen: list[int], cluster: Cluster) -> dict[int, Placement]:
    """Per job index, its GPUs (empty: it waits)."""
    columns, views = problem.columns, problem.views
    sized: Sized = []
    guests: list[tuple[int, int, GpuId]] = []
    """(job index, host's job index, slot) of every guest column chosen."""
    for job, index in enumerate(chosen):
        column = columns[index]
        if column.kind == GUEST:
            if column.needs is not None and column.slot is not None:
                guests.append((job, columns[column.needs].job, column.slot))
            continue
        if column.gpus == 0:
            continue
        view = views[job]
        sized.append((job, column.gpus, view.current if view.guest_of is None else ()))
    placements: dict[int, Placement] = dict.fromkeys(range(len(views)), ())
    kept, starts, taken = _kept_and_starts(sized, cluster)
    if kept is not None:
        for job, _, current in kept:
            placements[job] = current
        if starts:
            requests = [_request(views[job], gpus, ()) for job, gpus, _ in starts]
            held = [current for _, _, current in kept]
            packed = pack_starts(held, requests, cluster, taken)
            for job, _, _ in starts:
                placements[job] = packed.get(views[job].job.id, ())
    else:
        requests = [_request(views[job], gpus, current) for job, gpus, current in sized]
        packed = pack(requests, cluster)
        for job, _, _ in sized:  # pack places only these; every other job waits
            placements[job] = packed.get(views[job].job.id, ())
    for job, host, slot in guests:
        if slot in placements[host]:
            placements[job] = (slot,)
    return placements


def _request(view: JobView, gpus: int, current: Placement) -> PackRequest:
    low = gpus if view.goodput is None else view.job.spec.worker_range[0]
    return PackRequest(view.job.id, gpus, current, low)


Sized = list[tuple[int, int, Placement]]
"""(job index, GPUs, GPUs it holds as a gang) of every column that takes GPUs whole."""


def _kept_and_starts(sized: Sized, cluster: Cluster) -> tuple[Sized | None, Sized, set[GpuId]]:
    """(the gangs that keep the GPUs they hold, the jobs that hold none, the kept GPUs) when
    every gang is one or the other and the kept GPUs are distinct and alive: :func:`pack`
    keeps them all then and places only the starts (:func:`pack_starts`; most rounds of a
    long replay start a few jobs or none). ``(None, [], ...)`` otherwise: a resize, or GPUs
    lost or held twice (a guest that takes GPUs of its own holds none as a gang: a start)."""
    kept: Sized = []
    starts: Sized = []
    taken: set[GpuId] = set()
    held = 0
    for entry in sized:
        current = entry[2]
        if not current:
            starts.append(entry)
        elif len(current) != entry[1]:
            return None, [], taken
        else:
            kept.append(entry)
            taken.update(current)
            held += len(current)
    if len(taken) != held or not cluster.alive_gpus.issuperset(taken):
        return None, [], taken
    return kept, starts, taken
