"""Who shares a GPU: each running guest and the gang it runs beside, and what a guest and a
host would get of their speeds alone on one GPU (the oracle's figures)."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain

from jigsaw.model.cluster import GpuId
from jigsaw.model.domain import Job
from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.plan import Plan
from jigsaw.oracle import GangTiming, Oracle
from jigsaw.policies.shared.plans import PlanCatalog

ANY_GPU: GpuId = (0, 0)
"""Where a host-and-guest pair is priced: one GPU, the same for every slot."""


def guest_hosts(jobs: Sequence[Job]) -> dict[str, str]:
    """Running one-GPU jobs that share a GPU with a larger (or earlier) gang: guest -> host."""
    held = list(chain.from_iterable(job.placement for job in jobs if job.state.holds_resources))
    if len(set(held)) == len(held):
        return {}  # no GPU holds two jobs: nobody is a guest
    owner: dict[GpuId, Job] = {}
    guests: dict[str, str] = {}
    ordered = sorted(jobs, key=lambda j: (-len(j.placement), j.run_started_at or 0.0, j.id))
    for job in ordered:
        if not job.state.holds_resources or not job.placement:
            continue
        shared = [owner[gpu] for gpu in job.placement if gpu in owner]
        if shared and len(job.placement) == 1:
            guests[job.id] = shared[0].id
            continue
        for gpu in job.placement:
            owner.setdefault(gpu, job)
    return guests


def worker_memory(oracle: Oracle, job: Job, plan: Plan) -> int | None:
    """Bytes the job's worker needs under ``plan`` (``None``: the oracle cannot say)."""
    try:
        return oracle.worker_memory_bytes(job.spec.model, job.spec.batch_size, plan, 0)
    except InvalidSpecError:
        return None


def slot_shares(
    catalog: PlanCatalog, oracle: Oracle, guest: Job, plan: Plan, host: GangTiming
) -> tuple[float, float] | None:
    """(guest's share of its speed alone, host's share of its own) when the guest runs under
    ``plan`` on a GPU of a host of timing ``host`` (reduced to :data:`ANY_GPU`)."""
    alone = catalog.timing(guest, plan, (ANY_GPU,))
    if alone is None:
        return None
    host_id = "\0host"  # no job id starts with a NUL
    times = oracle.colocation.iteration_times({host_id: host, guest.id: alone})
    # Never above its speed alone: a share of the GPU's time (what bounds a guest's price
    # from below, :meth:`~.cotenancy.Cotenancy.guest_price_floors`).
    return min(alone.alone_s / times[guest.id], 1.0), host.alone_s / times[host_id]
