"""Who shares a GPU among the running jobs: each guest and the gang it runs beside."""

from __future__ import annotations

import operator
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


class GuestHostsMemo:
    """:func:`guest_hosts` of the last running side, kept while it is the very same job
    objects in the same order (between events, every round; a job is replaced on every
    change, so the same objects hold the same GPUs)."""

    __slots__ = ("_found", "_jobs", "keep")

    def __init__(self, *, keep: bool = True) -> None:
        """``keep=False``: every call finds them afresh (the reference the kept answers are
        tested against)."""
        self.keep = keep
        self._jobs: Sequence[Job] = ()
        self._found: dict[str, str] = {}

    def of(self, jobs: Sequence[Job]) -> dict[str, str]:
        """Guest -> host (a fresh dict: callers may keep it)."""
        same = len(jobs) == len(self._jobs) and all(map(operator.is_, jobs, self._jobs))
        if not (self.keep and same):
            self._jobs, self._found = jobs, guest_hosts(jobs)
        return dict(self._found)
