"""Waiting gangs the cluster shrank below (a node was lost): marked with a reason and an event.

The policies skip such a gang (fifo and the gang policies do not let it block the queue); this
module tells its owner why it waits. After each round the leader records, once per job, a
``PENDING -> PENDING`` event whose reason says how many GPUs the job needs and how many are
alive. When the node comes back the job starts as usual.
"""

from __future__ import annotations

from collections.abc import Iterable

from api.store import SqlStore
from jigsaw.model.domain import Job

PREFIX = "unschedulable:"


def unschedulable_reason(job: Job, alive_gpus: int) -> str | None:
    if job.spec.workers <= alive_gpus:
        return None
    return (
        f"{PREFIX} needs {job.spec.workers} GPUs but the cluster has {alive_gpus} alive; "
        "skipped until nodes come back (cancel it or resubmit with fewer workers)"
    )


def mark_unschedulable(
    store: SqlStore, waiting: Iterable[Job], alive_gpus: int, now: float, actor: str
) -> list[str]:
    """Record the reason on each waiting job that cannot fit and is not marked yet; the ids."""
    marked: list[str] = []
    for job in waiting:
        reason = unschedulable_reason(job, alive_gpus)
        if reason is None or job.reason == reason:
            continue
        if store.mark_unschedulable(job, reason, now, actor) is not None:
            marked.append(job.id)
    return marked
