"""Where each waiting job stands: its place in the policy's order, its estimated start and why
it waits. The one function that says it, for ``GET /scheduler/queue`` and for a waiting job's
``waiting`` in ``GET /jobs`` and ``GET /jobs/{id}``, so ``queue``, ``status``, ``describe``,
``list`` and ``--watch`` use the same words."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from api.privacy import PrivacyMask
from api.queue_estimate import estimate_queue
from api.queue_order import queue_order
from api.queue_reasons import ClusterNow, gpus, waiting_reason
from api.schemas.scheduler import QueueEntry
from api.state import AppState
from api.timefmt import iso
from jigsaw.model.domain import Job
from jigsaw.policies.quota import Quotas


@dataclass(frozen=True, slots=True)
class QueueView:
    order: str
    """How the policy orders waiting jobs, in words."""
    entries: dict[str, QueueEntry]
    """By the job's real id, in queue order; each as ``mask`` lets its viewer see it."""


def queue_view(state: AppState, mask: PrivacyMask, now: float | None = None) -> QueueView:
    """Every waiting job's place, estimate and reason, in the order the server's policy takes
    them (:mod:`api.queue_order`)."""
    now = time.time() if now is None else now
    active = state.store.active_jobs()
    totals = state.store.gpu_totals()
    total = totals.alive if totals.recorded else state.settings.gpus
    running = [job for job in active if job.state.holds_resources]
    observed = state.store.observed_rates(job.id for job in running)
    quotas = Quotas(state.settings.queue_quotas, state.settings.user_quotas)
    cluster = ClusterNow.of(active, total)
    order = queue_order(state.settings.policy, state.settings.policy_options)

    def rate_of(job: Job) -> float:
        return observed.get(job.id) or state.oracle.rate(job.spec, job.plan)

    entries: dict[str, QueueEntry] = {}
    ahead: str | None = None
    waiting = order.waiting(active, now, total)
    for estimate in estimate_queue(running, waiting, total, now, rate_of):
        job = estimate.job
        blocked = never_starts(job, total, quotas)
        start = None if blocked else estimate.start_at
        finite = start is not None and math.isfinite(start)
        wait = max(start - now, 0.0) if finite and start is not None else None
        reason = waiting_reason(
            job, blocked=blocked, ahead=ahead, cluster=cluster, quotas=quotas, now=now
        )
        entries[job.id] = mask.queue_entry(
            QueueEntry(
                job_id=job.id,
                name=job.spec.name,
                user=job.spec.user,
                position=estimate.position,
                estimated_start_at=iso(start) if finite else None,
                estimated_wait_s=wait,
                blocked=blocked,
                reason=mask.text(reason),
            )
        )
        if blocked is None:  # the scheduler skips a gang that can never start
            shown = mask.alias(job.id) if mask.hides(job.spec.user) else job.spec.name
            ahead = f"{shown} (#{estimate.position})"
    return QueueView(order.words, entries)


def never_starts(job: Job, alive_gpus: int, quotas: Quotas) -> str | None:
    """Why a waiting job cannot start on the cluster as it is (None: it can, in time)."""
    if job.spec.workers > alive_gpus:
        return f"needs {gpus(job.spec.workers)}; the cluster has {alive_gpus} alive"
    return quotas.never_fits(job.spec)
