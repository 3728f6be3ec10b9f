"""Why a waiting job waits, in one phrase (the queue's REASON, as ``squeue`` or ``kubectl
describe`` give it): ``needs 4 GPUs, 0 free; behind r18 (#1)``.

The first reason that applies wins: it can never start (``blocked``), it backs off after a
failure, its queue or user is at its quota, there are not enough free GPUs, a job ahead of it
goes first, or nothing holds it but the next scheduling round. The reasons read the cluster
as it is now; a policy that packs or preempts (jigsaw, las) may still start a job sooner.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from jigsaw.model.domain import Job
from jigsaw.model.lifecycle import JobState
from jigsaw.policies.quota import Quotas


@dataclass(frozen=True, slots=True)
class ClusterNow:
    """What the reasons read of the cluster: free GPUs and the GPUs each queue and user hold."""

    free_gpus: int
    queue_use: Counter[str]
    user_use: Counter[str]

    @classmethod
    def of(cls, active: Sequence[Job], alive_gpus: int) -> ClusterNow:
        holding = [job for job in active if job.state.holds_resources]
        busy = {gpu for job in holding for gpu in job.placement}
        queue_use: Counter[str] = Counter()
        user_use: Counter[str] = Counter()
        for job in holding:
            queue_use[job.spec.queue] += len(job.placement)
            user_use[job.spec.user] += len(job.placement)
        return cls(max(alive_gpus - len(busy), 0), queue_use, user_use)


def gpus(count: int) -> str:
    return f"{count} GPU" if count == 1 else f"{count} GPUs"


def waiting_reason(
    job: Job,
    *,
    blocked: str | None,
    ahead: str | None,
    cluster: ClusterNow,
    quotas: Quotas,
    now: float,
) -> str:
    """One phrase saying why ``job`` has not started. ``ahead`` names the waiting job just
    before it in the queue (``r18 (#1)``), ``None`` at the head."""
    if blocked is not None:
        return f"never starts as the cluster is: {blocked}"
    if job.retry_after is not None and job.retry_after > now:
        until = datetime.fromtimestamp(job.retry_after, UTC).strftime("%H:%M:%SZ")
        return f"backing off after a failure until {until} (attempt {job.attempt})"
    over_quota = quotas.limit_violated(
        job.spec, cluster.queue_use[job.spec.queue], cluster.user_use[job.spec.user]
    )
    holds: list[str] = []
    if over_quota is not None:
        holds.append(f"at quota: {over_quota}")
    elif cluster.free_gpus < job.spec.workers:
        holds.append(f"needs {gpus(job.spec.workers)}, {cluster.free_gpus} free")
    if ahead is not None:
        holds.append(f"behind {ahead}")
    if not holds:
        holds.append(f"{gpus(cluster.free_gpus)} free: starts at the next scheduling round")
    if job.state is JobState.PREEMPTED and job.preempted_by:
        holds.insert(0, f"preempted by {job.preempted_by}")
    return ", ".join(holds)
