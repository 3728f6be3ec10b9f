"""Gavel's FIFO as Gavel's simulator runs it (``fifo`` with ``ranking="gavel"``).

Read from stanford-futuredata/gavel (``scheduler/policies/fifo.py``, ``FIFOPolicy`` in its
base mode, and the round mechanism of ``scheduler.py``), reimplemented:

- **Allocation, at each reset.** Jobs allocated before keep their allocation (``x = 1``).
  Walking them in arrival order, each job that finished since hands its place to the head of
  the queue if the head's gang fits the GPUs *counted free so far*; the GPUs of later
  allocated jobs are not counted yet at that point, so the allocation can hold more gangs than
  the cluster has GPUs. Then queue heads are added while they fit what is left, stopping at
  the first that does not (no backfilling).
- **Rounds.** The allocated jobs share the GPUs round by round with the priority of Gavel's
  max-min (:class:`jigsaw.policies.shared.gavel_share.GavelPriorities`: ``x / fraction`` of the time
  run since the last reset): an over-full allocation is time-sliced, so Gavel's FIFO preempts
  (2,901 times on ``generated_2000`` at 64 GPUs). Jobs not allocated never run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import attrgetter

from jigsaw.model.decisions import Decision
from jigsaw.model.domain import Job
from jigsaw.model.snapshot import Snapshot
from jigsaw.planning.planner import Planner
from jigsaw.policies.shared.gang import gang_round
from jigsaw.policies.shared.gavel_share import GavelPriorities

_ARRIVAL = attrgetter("submitted_at", "id")


def gavel_fifo_allocation(
    jobs: Sequence[Job], capacity: int, previous: Mapping[str, float]
) -> dict[str, float]:
    """``x = 1`` for every allocated job, in arrival order (``previous`` is in that order)."""
    active = {job.id: job for job in jobs}
    queue = sorted((job for job in jobs if job.id not in previous), key=_ARRIVAL)
    chosen: list[Job] = []
    free = capacity
    for job_id in previous:
        job = active.get(job_id)
        if job is not None:
            chosen.append(job)
            free -= job.spec.workers
        elif queue and queue[0].spec.workers <= free:
            head = queue.pop(0)
            chosen.append(head)
            free -= head.spec.workers
    while queue and free > 0 and queue[0].spec.workers <= free:
        head = queue.pop(0)
        chosen.append(head)
        free -= head.spec.workers
    return {job.id: 1.0 for job in sorted(chosen, key=_ARRIVAL)}


def gavel_fifo_round(
    snapshot: Snapshot, priorities: GavelPriorities, planner: Planner
) -> list[Decision]:
    """The round's decisions; ``priorities`` are only read (the policy's ``end_round`` keeps
    the round's state, resets in rounds nobody waits in included)."""
    if not snapshot.waiting:
        return []
    jobs = snapshot.running + snapshot.waiting
    state = priorities.round_state(jobs, snapshot.now, len(snapshot.cluster.gpu_ids()))
    ranked = priorities.ranked(jobs, snapshot.now, state)
    allocated = [job for job in ranked if state.allocation.get(job.id, 0.0) > 0.0]
    return gang_round(
        snapshot, allocated, planner=planner, min_run_s=0.0, label="fifo", reserve=False
    )
