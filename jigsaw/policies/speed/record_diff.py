"""What changed between two rounds' job records, found by object identity (part of
:mod:`jigsaw.policies.speed.round_memory`, which says why identity is enough)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import compress
from operator import attrgetter, is_, not_

from jigsaw.model.domain import Job

_JOB_ID = attrgetter("id")


def record_diff(
    last: Mapping[int, Job], jobs: Sequence[Job]
) -> tuple[Mapping[int, Job], list[Job], list[str]]:
    """``(seen, added, gone)``: this round's records by identity (the next round's ``last``),
    the records that are new since ``last``, and the ids of jobs whose last record is gone
    with no new record for them (finished, cancelled, or no longer in this view)."""
    if len(jobs) == len(last) and all(map(is_, jobs, last.values())):
        return last, [], []  # the same records in the same order: nothing changed
    seen = dict(zip(map(id, jobs), jobs, strict=True))
    if seen.keys() == last.keys():
        return seen, [], []
    added = [seen[address] for address in seen.keys() - last.keys()]
    still = {job.id for job in added}
    gone = [
        job_id
        for job_id in (last[address].id for address in last.keys() - seen.keys())
        if job_id not in still
    ]
    return seen, added, gone


def changed_records(last: Mapping[str, Job], jobs: Sequence[Job]) -> tuple[list[Job], list[str]]:
    """``(added, gone)`` as :func:`record_diff` finds them, against ``last``, the records a
    caller holds by job id (it holds them: identity stays meaningful). Every pass over
    ``jobs`` runs in C, which matters when hundreds of jobs wait and a handful change."""
    same = list(map(is_, jobs, map(last.get, map(_JOB_ID, jobs))))
    added = [] if all(same) else list(compress(jobs, map(not_, same)))
    newcomers = sum(1 for job in added if job.id not in last)
    if len(jobs) - newcomers == len(last):
        return added, []  # every job ``last`` holds is still here
    present = set(map(_JOB_ID, jobs))
    return added, [job_id for job_id in last if job_id not in present]
