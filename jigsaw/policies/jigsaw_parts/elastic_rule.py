"""The simple elastic rule, until a goodput policy sizes jobs: an elastic job grows into GPUs
nobody waits for and shrinks back to ``min_workers`` as soon as someone waits.

After the round's own decisions (:class:`~jigsaw.policies.jigsaw.JigsawPolicy` calls it):

1. the jobs it may resize: running (workers up), elastic, data parallel at full backprop (a
   gang hosting SPB slack keeps its size), and not already decided about this round;
2. *someone waits* when a waiting job that the round did not start could ever fit the
   cluster: then every such job above ``min_workers`` shrinks to it, keeping its first GPUs;
3. otherwise the GPUs no worker holds (less what the round's starts take) go to those jobs in
   arrival order, each up to ``max_workers`` (on as few nodes as the free GPUs allow).

A resized job keeps its global batch under ``batch_policy: fixed`` (each worker takes
``global / N``); under ``adaptive`` it keeps it as nearly as its bounds allow. The rule reads
only the snapshot, so the same world always gets the same answer: it needs no rounds of its
own (an arrival, a finish or a start is what changes it), and the simulator replays it as the
service runs it.

**Priced** (with a :class:`~jigsaw.policies.jigsaw_parts.resize_pricing.ResizePricing`, the jigsaw
policy's
default): a resize costs its measured seconds, so a job resized within its hold keeps its
size; a job grows only to the size whose saving pays the cost by the margin (the best such);
and it shrinks only for the waiters the freed GPUs let start, by the GPUs they need (never
below ``min_workers``; the jobs in arrival order, each serving the waiters left), when what
they gain pays what it loses and the cost.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from jigsaw.model.cluster import GpuId, Placement
from jigsaw.model.decisions import Decision, Resize, Start
from jigsaw.model.domain import Job
from jigsaw.model.lifecycle import JobState
from jigsaw.model.plan import SPBPlan, full_backprop
from jigsaw.model.snapshot import Snapshot
from jigsaw.policies.jigsaw_parts.resize_pricing import ResizePricing
from jigsaw.policies.shared.placement import compact_placement, group_by_node, take


def elastic_resizes(
    snapshot: Snapshot, decided: Sequence[Decision], pricing: ResizePricing | None = None
) -> list[Decision]:
    """The resizes the rule adds to a round that ``decided`` the rest (``pricing``: priced;
    ``None``: every resize is free)."""
    touched = {decision.job_id for decision in decided}
    resizable = [job for job in snapshot.running if job.id not in touched and _resizable(job)]
    if pricing is not None:
        pricing = pricing.seeing(snapshot)
        resizable = [job for job in resizable if not pricing.held(job, snapshot.now)]
    if not resizable:
        return []
    gpus = snapshot.cluster.num_gpus
    waiting = [j for j in snapshot.waiting if j.id not in touched and j.spec.workers <= gpus]
    started = {gpu for d in decided if isinstance(d, Start) for gpu in d.placement}
    free = group_by_node(gpu for gpu in snapshot.free_gpus() if gpu not in started)
    if waiting and pricing is not None:
        per_node = max((node.num_gpus for node in snapshot.cluster.nodes), default=1)
        return _priced_shrinks(resizable, waiting, free, pricing, per_node)
    if waiting:
        return [
            resize
            for job in resizable
            if (resize := _resize(job, job.placement[: job.spec.worker_range[0]], waiting))
        ]
    resizes: list[Decision] = []
    for job in resizable:
        room = min(job.spec.worker_range[1] - len(job.placement), sum(map(len, free.values())))
        options = [
            (job, (*job.placement, *grown))
            for extra in range(room, 0, -1)
            if (grown := compact_placement(free, extra)) is not None
        ]
        if pricing is not None:
            options = _paying(options, pricing)
        for _, placement in options:
            resize = _resize(job, placement, [])
            if resize is not None:
                take(free, placement[len(job.placement) :])
                resizes.append(resize)
                break
    return resizes


def _paying(
    options: list[tuple[Job, Placement]], pricing: ResizePricing
) -> list[tuple[Job, Placement]]:
    """The grown placements whose saving pays, the one saving the most first."""
    gains = []
    for job, placement in options:
        batch = worker_batch(job, len(placement))
        gain = pricing.grow_gain_s(job, batch, placement) if batch is not None else None
        if gain is not None:
            gains.append((gain, job, placement))
    gains.sort(key=lambda found: -found[0])
    return [(job, placement) for _, job, placement in gains]


def _priced_shrinks(
    resizable: Sequence[Job],
    waiting: Sequence[Job],
    free: dict[int, list[GpuId]],
    pricing: ResizePricing,
    gpus_per_node: int,
) -> list[Decision]:
    """Each job in arrival order gives up the GPUs the waiters its shrink lets start need
    (those the free GPUs alone could not start; never below ``min_workers``) when that pays,
    and those waiters are then served."""
    pool = sum(map(len, free.values()))
    left = list(waiting)
    resizes: list[Decision] = []
    for job in resizable:
        spare = len(job.placement) - job.spec.worker_range[0]
        before = {w.id for w in _fitting(left, pool)}
        after = _fitting(left, pool + spare)
        helped = [w for w in after if w.id not in before]
        needed = sum(w.spec.workers for w in after) - pool
        if spare <= 0 or not helped or needed <= 0:
            continue
        kept = job.placement[: len(job.placement) - needed]
        batch = worker_batch(job, len(kept))
        if batch is None or not pricing.shrink_pays(job, batch, kept, helped, gpus_per_node):
            continue
        resize = _resize(job, kept, helped)
        if resize is not None:
            resizes.append(resize)
            pool += needed - sum(w.spec.workers for w in helped)
            left = [w for w in left if w not in helped]
    return resizes


def _fitting(waiting: Sequence[Job], gpus: int) -> list[Job]:
    """The waiters that GPUs would start, in queue order, each taking its workers."""
    fits: list[Job] = []
    for job in waiting:
        if job.spec.workers <= gpus:
            fits.append(job)
            gpus -= job.spec.workers
    return fits


def _resizable(job: Job) -> bool:
    return (
        job.state is JobState.RUNNING
        and job.spec.is_elastic
        and isinstance(job.plan, SPBPlan)
        and job.plan.is_full_backprop
    )


def _resize(job: Job, placement: Placement, waiting: Sequence[Job]) -> Resize | None:
    size, was = len(placement), len(job.placement)
    batch = worker_batch(job, size)
    if size == was or batch is None:
        return None
    assert job.plan is not None
    if waiting:
        to = "back to min_workers" if size == job.spec.worker_range[0] else "down to what they need"
        why = f"{len(waiting)} job(s) wait, {waiting[0].id} first: {to}"
    else:
        why = "into GPUs nobody waits for"
    return Resize(
        job.id,
        placement,
        full_backprop(size, job.plan.num_blocks),
        batch,
        f"elastic: {was} -> {size} workers {why} (global batch {size * batch})",
    )


def worker_batch(job: Job, size: int) -> int | None:
    """Samples per worker at ``size`` workers: the fixed global batch split evenly; an
    adaptive one kept as nearly as its bounds allow (``None``: no batch at that size does)."""
    spec = job.spec
    if spec.batch_policy == "fixed":
        return spec.global_batch // size
    lowest, highest = spec.batch_range
    low, high = math.ceil(lowest / size), highest // size
    if low > high:
        return None
    current = job.current_worker_batch * len(job.placement)
    return min(max(round(current / size), low, 1), high)
