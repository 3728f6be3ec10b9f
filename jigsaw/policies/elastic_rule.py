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
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from jigsaw.decisions import Decision, Resize, Start
from jigsaw.domain import Job
from jigsaw.lifecycle import JobState
from jigsaw.placement import compact_placement, group_by_node, take
from jigsaw.plan import SPBPlan, full_backprop
from jigsaw.snapshot import Snapshot


def elastic_resizes(snapshot: Snapshot, decided: Sequence[Decision]) -> list[Decision]:
    """The resizes the rule adds to a round that ``decided`` the rest."""
    touched = {decision.job_id for decision in decided}
    resizable = [job for job in snapshot.running if job.id not in touched and _resizable(job)]
    if not resizable:
        return []
    gpus = snapshot.cluster.num_gpus
    waiting = [j for j in snapshot.waiting if j.id not in touched and j.spec.workers <= gpus]
    if waiting:
        return [
            resize
            for job in resizable
            if (resize := _resize(job, job.placement[: job.spec.worker_range[0]], waiting))
        ]
    started = {gpu for d in decided if isinstance(d, Start) for gpu in d.placement}
    free = group_by_node(gpu for gpu in snapshot.free_gpus() if gpu not in started)
    resizes: list[Decision] = []
    for job in resizable:
        room = min(job.spec.worker_range[1] - len(job.placement), sum(map(len, free.values())))
        for extra in range(room, 0, -1):
            grown = compact_placement(free, extra)
            resize = _resize(job, (*job.placement, *grown), []) if grown else None
            if resize is not None and grown is not None:
                take(free, grown)
                resizes.append(resize)
                break
    return resizes


def _resizable(job: Job) -> bool:
    return (
        job.state is JobState.RUNNING
        and job.spec.is_elastic
        and isinstance(job.plan, SPBPlan)
        and job.plan.is_full_backprop
    )


def _resize(job: Job, placement: tuple[tuple[int, int], ...], waiting: list[Job]) -> Resize | None:
    size, was = len(placement), len(job.placement)
    batch = worker_batch(job, size)
    if size == was or batch is None:
        return None
    assert job.plan is not None
    if waiting:
        why = f"{len(waiting)} job(s) wait, {waiting[0].id} first: back to min_workers"
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
