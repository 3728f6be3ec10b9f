""":func:`~jigsaw.policies.shared.gang.gang_round` on a kept ranking and kept running gangs
(part of :mod:`jigsaw.policies.speed.round_memory`): the same decisions, for less work.

What the reference works out from every job each round is read off kept state instead: the
protected gangs and the free GPUs (:class:`~jigsaw.policies.speed.running_gangs.RunningGangs`),
the victims' order (their LAS keys, not a pass over the whole ranking).

The walk itself skips what cannot change its outcome. Once a waiting gang holds the
reservation and the budget is down to it (``budget <= reserved``), no waiting gang can be
selected or reserve any more, and the budget only shrinks: the reference walks on over every
waiting job (on a full cluster, most of the queue) only to reach the running gangs ranked
below them. This walk jumps to those, in the running jobs' own order
(:attr:`~jigsaw.policies.speed.sided_ranking.SidedLasRanking.held`). What the walk reads
of a job (its id, gang size and side) is kept with it in the ranking.
"""

from __future__ import annotations

import bisect
from itertools import islice
from operator import attrgetter

from jigsaw.model.decisions import Decision
from jigsaw.model.domain import Job
from jigsaw.model.snapshot import Snapshot
from jigsaw.planning.planner import Planner
from jigsaw.policies.shared.gang import start_and_preempt
from jigsaw.policies.speed.running_gangs import RunningGangs
from jigsaw.policies.speed.sided_ranking import SidedLasRanking

_KEY = attrgetter("key")


def kept_gang_round(
    snapshot: Snapshot,
    ranking: SidedLasRanking,
    gangs: RunningGangs,
    *,
    planner: Planner,
    min_run_s: float,
    label: str,
    reserve: bool = True,
) -> list[Decision]:
    """``gang_round(snapshot, las_order(...), ...)``, with ``ranking`` and ``gangs`` kept up
    to ``snapshot`` (:meth:`~jigsaw.policies.speed.round_memory.RoundMemory.las_round`)."""
    capacity = len(snapshot.cluster.alive_gpus)
    selected, protected_workers = gangs.protected(snapshot.now, min_run_s)
    budget = capacity - protected_workers
    holders_ahead = len(gangs.held) - len(selected)  # running, unselected, not reached yet
    reserved = 0
    newcomers: list[Job] = []
    select, admit = selected.add, newcomers.append
    only_held_from = -1
    # Waiting jobs are never in ``selected`` (it starts with protected running gangs) and
    # only running ones are read from it afterwards: a waiting newcomer is not added.
    for index, entry in enumerate(ranking.ranked):
        if budget <= 0:
            break
        workers = entry.workers
        if entry.held:
            job_id = entry.id
            if job_id in selected:
                continue
            holders_ahead -= 1
            if workers <= budget:
                select(job_id)
                budget -= workers
        elif workers <= budget - reserved:
            budget -= workers
            admit(entry.job)
        elif reserved == 0 and reserve and workers <= capacity:
            reserved = workers
        if budget <= reserved:  # no waiting gang can be selected or reserve from here on
            if holders_ahead:
                only_held_from = index
            break
    if only_held_from >= 0:
        after = bisect.bisect_right(ranking.held_keys, ranking.keys[only_held_from])
        for entry in islice(ranking.held, after, None):
            if budget <= 0:
                break
            job_id = entry.id
            if job_id in selected:
                continue
            holders_ahead -= 1
            if entry.workers <= budget:
                select(job_id)
                budget -= entry.workers
            if holders_ahead == 0:
                break
    if not newcomers:
        return []
    outranked = [ranking.entry(job_id) for job_id in gangs.held - selected]
    outranked.sort(key=_KEY, reverse=True)
    victims = [entry.job for entry in outranked]
    pool = gangs.pool(victims)
    return start_and_preempt(newcomers, victims, pool, planner=planner, label=label)
