"""One round of a preemptive gang policy: keep the best-ranked jobs that fit, preempt the rest.

The policy supplies the ranking (LAS, max-min, ...); this module turns it into decisions:

1. jobs that started less than ``min_run_s`` ago are kept (a restart costs a checkpoint and
   a relaunch, so a fresh gang is not preempted before it has paid that back;
   ``DEFAULT_MIN_RUN_S``);
2. walking the ranking, a job is selected while its whole gang fits in the GPUs left;
   smaller waiting jobs further down may backfill holes, except the GPUs reserved for the
   best-ranked waiting gang that did not fit (so it cannot starve);
3. running jobs not selected are preempted, lowest-ranked first; each names the job that
   took its GPUs (or the best-ranked newcomer);
4. selected waiting jobs start on compact placements over the free and freed GPUs.

Every worker gets a GPU of its own: these policies never pack.
"""

from __future__ import annotations

from collections.abc import Sequence

from jigsaw.model.cluster import GpuId, Placement
from jigsaw.model.decisions import Decision, Preempt, Start
from jigsaw.model.domain import Job
from jigsaw.model.snapshot import Snapshot
from jigsaw.planning.planner import Planner
from jigsaw.policies.shared.placement import group_by_node

DEFAULT_MIN_RUN_S = 1_800.0
"""Shared by las, maxmin and jigsaw so they differ only in ranking and placement. A restart
costs about 30 s (checkpoint, relaunch, restore); 30 minutes keeps that under 2% of a run.
On the busiest Philly fortnight (1,500 jobs, 64 GPUs) 120 s made LAS preempt each job 37
times on average; 1,800 s cut preemptions by 9x and avg JCT by 12% for every policy."""


def run_time_s(job: Job, now: float) -> float:
    """Seconds since the current run began (ADMITTED jobs have not begun: 0)."""
    return now - job.run_started_at if job.run_started_at is not None else 0.0


def is_protected(job: Job, now: float, min_run_s: float) -> bool:
    return job.state.holds_resources and run_time_s(job, now) < min_run_s


def protection_ends(jobs: Sequence[Job], now: float, min_run_s: float) -> float:
    """The earliest time after ``now`` at which a protected gang stops being protected, if no
    job changes state meanwhile (inf: never). ADMITTED gangs stay protected until they start.
    """
    ends = [
        job.run_started_at + min_run_s
        for job in jobs
        if job.run_started_at is not None
        and job.state.holds_resources
        and job.run_started_at + min_run_s >= now
    ]
    return min(ends, default=float("inf"))


def gang_round(
    snapshot: Snapshot,
    ranked: Sequence[Job],
    *,
    planner: Planner,
    min_run_s: float,
    label: str,
    reserve: bool = True,
) -> list[Decision]:
    """``reserve=False`` drops step 2's reservation: any lower-ranked gang that fits the GPUs
    left may start (Tiresias in Pollux's simulator, Gavel's round scheduler). ``ranked``
    holds every running and waiting job of the snapshot."""
    now = snapshot.now
    alive = snapshot.cluster.alive_gpus
    capacity = budget = len(alive)
    holds = {job.id for job in snapshot.running}
    selected: set[str] = set()
    for job in snapshot.running:
        started = job.run_started_at
        if started is None or now - started < min_run_s:  # still starting, or fresh
            selected.add(job.id)
            budget -= job.spec.workers
    reserved = 0
    newcomers: list[Job] = []
    # The walk below may run over every ranked job: names are bound locally.
    select, admit = selected.add, newcomers.append
    holders_ahead = len(holds) - len(selected)  # running gangs, unselected, not reached yet
    for job in ranked:
        if budget <= 0:
            break  # every gang has a worker: nothing more can be selected
        job_id = job.id
        if job_id in selected:
            continue
        workers = job.spec.workers
        if job_id in holds:
            holders_ahead -= 1
            if workers <= budget:
                select(job_id)
                budget -= workers
        elif workers <= budget - reserved:
            select(job_id)
            budget -= workers
            admit(job)
        elif reserved == 0 and reserve and workers <= capacity:
            # Reserve for the best-ranked waiting gang that does not fit: waiting jobs ranked
            # below it may not take the GPUs it is waiting for, or a stream of small jobs
            # would starve a big gang forever. A gang larger than the alive cluster reserves
            # nothing: it could never use the reservation.
            reserved = workers
        if holders_ahead == 0 and budget <= reserved:
            break  # no running gang is left and no waiting one fits beside the reservation
    if not newcomers:
        return []  # preempting frees GPUs nobody would use this round
    outranked = holds - selected
    victims = [job for job in reversed(ranked) if job.id in outranked] if outranked else []
    # The free GPUs (snapshot.free_gpus(), as a set: the pool is sorted anyway) and those the
    # victims free. Taking the placements out of a copy of the alive set reuses its hashes.
    free = set(alive)
    free.difference_update(*[job.placement for job in snapshot.running])
    for victim in victims:
        free.update(gpu for gpu in victim.placement if gpu in alive)
    pool = group_by_node(sorted(free))
    return start_and_preempt(newcomers, victims, pool, planner=planner, label=label)


def start_and_preempt(
    newcomers: Sequence[Job],
    victims: Sequence[Job],
    pool: dict[int, list[GpuId]],
    *,
    planner: Planner,
    label: str,
) -> list[Decision]:
    """Steps 3 and 4 of a round: ``newcomers`` (best-ranked first) start on compact
    placements out of ``pool`` (the free GPUs by node, each node's sorted; changed in
    place), and each of ``victims`` (lowest-ranked first) is preempted, naming the newcomer
    that took one of its GPUs, else the best-ranked newcomer that started."""
    owner_of: dict[GpuId, str] = {}
    starts: list[Decision] = []
    ranked_to_run = f"{label}: ranked to run"
    first_newcomer: str | None = None
    for job in newcomers:
        placement = take_compact_placement(pool, job.spec.workers)
        if placement is None:  # cannot happen while budgets add up; never start half a gang
            continue
        job_id = job.id
        if first_newcomer is None:
            first_newcomer = job_id
        owner_of.update(dict.fromkeys(placement, job_id))
        starts.append(Start(job_id, placement, planner.start_plan(job), ranked_to_run))
    preempts: list[Decision] = []
    outranked = f"{label}: outranked"
    for victim in victims:
        by = next((owner_of[g] for g in victim.placement if g in owner_of), first_newcomer)
        if by is None:
            continue
        preempts.append(Preempt(victim.id, outranked, by=by))
    return preempts + starts


def take_compact_placement(pool: dict[int, list[GpuId]], workers: int) -> Placement | None:
    """``compact_placement(pool, workers)``, then ``take(pool, placement)``: one call per
    start instead of two, with the lists and sets those build left out. ``pool`` is as
    :func:`group_by_node` builds it from sorted GPUs (each node's list sorted, no GPU twice),
    and taking keeps it so: the GPUs chosen on a node are its first ones, and what is left
    of its list is the rest (tests/core/policies/test_gang_placement.py holds the two
    ways equal)."""
    sizes = [(len(gpus), node) for node, gpus in pool.items()]
    fitting = [item for item in sizes if item[0] >= workers]
    if fitting:  # the fullest node that still fits: best fit
        size, node = min(fitting)
        gpus = pool[node]
        if size == workers:
            del pool[node]
        else:
            pool[node] = gpus[workers:]
        return tuple(gpus[:workers])
    if sum(size for size, _ in sizes) < workers:
        return None
    chosen: list[GpuId] = []
    for minus_size, node in sorted((-size, node) for size, node in sizes):  # fewest nodes
        gpus = pool[node]
        need = workers - len(chosen)
        chosen.extend(gpus[:need])
        if need >= -minus_size:
            del pool[node]
        else:
            pool[node] = gpus[need:]
        if len(chosen) == workers:
            break
    return tuple(chosen)
