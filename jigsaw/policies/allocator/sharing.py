"""Who shares a GPU among the running jobs: each guest and the gang it runs beside."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain

from jigsaw.model.cluster import GpuId
from jigsaw.model.domain import Job


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
