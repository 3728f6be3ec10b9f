"""Each job's configurations this round, as columns of one problem: exclusive sizes and off.

A *column* is a complete answer for one job: how many GPUs of its own it takes (0 for off and
for a guest), what it costs in the objective (:mod:`.objective`), and for co-tenancy what it
needs or offers (:mod:`.cotenancy` adds those columns). The solver picks exactly one column
per job (:mod:`.solve`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

import numpy as np

from jigsaw.goodput.source import JobGoodput
from jigsaw.model.cluster import GpuId, Placement
from jigsaw.model.domain import Job
from jigsaw.model.lifecycle import JobState
from jigsaw.model.plan import Plan
from jigsaw.policies.allocator.config import JigsawConfig
from jigsaw.policies.allocator.knowledge import SizeChoices, allowed_sizes, size_choices
from jigsaw.policies.allocator.longest_job import NO_PATH, CriticalPath
from jigsaw.policies.allocator.must_run import critical_starts, ends_by, forced, held, starving
from jigsaw.policies.allocator.objective import Objective
from jigsaw.policies.allocator.row_memo import JobRow, RowMemo, steady_until, usable
from jigsaw.policies.shared.cost_curve import Flat

OFF, EXCLUSIVE, HOST, GUEST = "off", "exclusive", "host", "guest"


class Column(NamedTuple):
    """Immutable; a tuple, since a round builds one per job and size (millions a replay)."""

    job: int
    """Index of the job in the round's list."""
    kind: str
    gpus: int
    """GPUs it takes whole: its size for an exclusive or host column, 0 otherwise."""
    cost: float
    speedup: float
    plan: Plan | None = None
    """A host's plan on its GPUs, a guest's plan on its slot (exclusive: chosen at placing)."""
    needs: int | None = None
    """A guest: the column (a host's, or its keep-size exclusive one) it shares a GPU of."""
    slot: GpuId | None = None
    """A guest: the GPU it shares."""
    host_loss: float = 0.0
    """A guest: the speedup its host's gang loses to the guest's turns on the slot."""
    host_cost: float = 0.0
    """A guest: what that loss adds to the host's term of the objective. A gang runs at its
    slowest GPU, so a host with several guests pays the worst of their losses, once
    (:mod:`.solve`), not their sum."""


_NO_COTENANCY = tuple(Column._field_defaults[name] for name in Column._fields[5:])
"""An exclusive or off column's ``plan``, ``needs``, ``slot``, ``host_loss``, ``host_cost``:
their defaults."""


class Paces(Protocol):
    """Per job index, its completion pace (:attr:`Problem.pace`); false: no completion row."""

    def __getitem__(self, job: int, /) -> float: ...

    def __len__(self) -> int: ...


class JobView(NamedTuple):
    """Immutable; a tuple, since a round builds one per job (a frozen dataclass's
    constructor cost more than the rest of its job's view)."""

    job: Job
    goodput: JobGoodput | None
    current: Placement
    """The GPUs it holds now (empty: waiting)."""
    choices: SizeChoices
    guest_of: str | None = None
    """A running one-GPU job sharing another gang's GPU: that gang's id."""
    pinned: bool = False
    """It keeps its configuration this round (starting, or within its minimum hold)."""

    @property
    def resizable(self) -> bool:
        return self.goodput is not None and self.job.state is JobState.RUNNING


@dataclass(slots=True)
class Problem:
    views: list[JobView]
    columns: list[Column] = field(default_factory=list)
    by_job: list[list[int]] = field(default_factory=list)
    """Column indices of each job; its exclusive and off columns come first, by size."""
    capacity: int = 0
    pace: Paces = field(default_factory=list)
    """Per job, completions per second per unit of speedup (:class:`~.remaining.
    CompletionPaces`, set by :mod:`.cotenancy` when it offers guests and the completion guard
    is on; empty: no completion row)."""
    cotenancy_offered: bool = False
    """Co-tenancy found slots to offer this round (guest prices move with the hosts' ages,
    so such a round is not stable, :meth:`~jigsaw.policies.jigsaw.JigsawPolicy.stable_until`)."""
    set_aside_cost: float = 0.0
    """What the waiting jobs left out of the round cost (they wait, at their off columns'
    price; :mod:`~jigsaw.policies.shared.backlog`): part of every answer's objective, so
    that HiGHS's relative gap and the test that keeps its answer read the same totals as a
    round over every job."""

    flat: Flat | None = None
    """Every column's GPUs and cost as the exclusive program read them (before the grid), for
    the quiet-round check to reprice; ``None`` before, and once a column is added or replaced."""

    stable_by_clock_until: float = math.inf
    """When a pin set this round lapses by the clock alone (the longest job's,
    :mod:`.longest_job`); the quiet-round hint ends there."""
    exclusive_only: bool = True
    """Every job's columns are its off and exclusive ones, consecutive, in size order (as
    :func:`exclusive_problem` builds them; :meth:`add` ends it): the size program then reads
    them as they stand (:func:`~jigsaw.policies.allocator.solve.solve_exclusive`)."""

    def add(self, column: Column) -> int:
        self.exclusive_only = False
        self.flat = None
        self.columns.append(column)
        self.by_job[column.job].append(len(self.columns) - 1)
        return len(self.columns) - 1

    def keep_column(self, job: int) -> int | None:
        """The exclusive column at the size the job holds now (``None``: it waits, or is a
        guest)."""
        view = self.views[job]
        if not view.current or view.guest_of is not None:
            return None
        for index in self.by_job[job]:
            column = self.columns[index]
            if column.kind == EXCLUSIVE and column.gpus == len(view.current):
                return index
        return None


def exclusive_problem(
    jobs: Sequence[Job],
    goodputs: Sequence[JobGoodput | None],
    guests_of: dict[str, str],
    objective: Objective,
    capacity: int,
    per_node: int,
    config: JigsawConfig,
    *,
    relax_guests: bool = False,
    population: int | None = None,
    remaining_s: Callable[[Job], float] | None = None,
    rows: RowMemo | None = None,
    critical: CriticalPath = NO_PATH,
) -> Problem:
    """Every job's off and exclusive columns (Pollux's configurations). ``population``: the
    jobs the fair share divides the GPUs among (default: ``jobs``; more where waiting jobs
    that wait whatever the round decides were left out of it, :mod:`~jigsaw.policies.shared.
    backlog`). ``remaining_s``: a job's seconds of work left (:mod:`.remaining`), for the
    starvation reservation's backfill; without it a reservation lets no other waiting job
    start. ``rows``: the last round's leading jobs and columns, kept where still valid
    (:mod:`.row_memo`). ``critical``: the critical path (:mod:`.longest_job`): its running
    jobs lose their off columns, and its waiting ones too while the GPUs suffice."""
    count = len(jobs) if population is None else population
    fair_share = max(-(-capacity // max(count, 1)), 1)  # 1 when every node is lost
    problem = Problem([], capacity=capacity)
    now = objective.now
    # The critical path's pins change rows: kept rows hold while the path is the same.
    memo_key = (fair_share, capacity, per_node, relax_guests, config, critical.key)
    if rows is not None and not usable(config):
        rows = None
    kept = rows.kept(jobs, guests_of, now, memo_key) if rows is not None else 0
    whole_jobs = jobs
    jobs, goodputs = jobs[kept:], goodputs[kept:]
    reusable: list[JobRow | None] = (
        rows.rows_of(jobs, guests_of, now, memo_key, critical.waiting)
        if rows is not None
        else [None] * len(jobs)
    )
    powers = config.sizes == "powers"
    allowed = [
        row.allowed if row is not None else allowed_sizes(job, goodput, capacity, per_node, powers)
        for job, goodput, row in zip(jobs, goodputs, reusable, strict=True)
    ]
    pinned = [
        row.pinned
        if row is not None
        else job.state is JobState.ADMITTED or held(job, now, config.min_hold_s)
        for job, row in zip(jobs, reusable, strict=True)
    ]
    # A guest shares its host's GPU: kept from the off column, it must take a GPU of its own,
    # and on a full cluster the program then has no feasible answer (a full-Philly replay
    # failed so). Such a round is built again with ``relax_guests``: guests are neither
    # protected nor pinned as starving.
    sharing = [relax_guests and job.id in guests_of for job in jobs]
    protected = [
        row.protected
        if row is not None
        else not pin
        and not guest
        and (held(job, now, config.min_run_s) or job.id in critical.running)
        for job, pin, guest, row in zip(jobs, pinned, sharing, reusable, strict=True)
    ]
    linear: dict[tuple[int, ...], SizeChoices] = {}
    starts: set[int] = set()
    room = capacity
    if critical.waiting:
        held_gpus = forced(whole_jobs[:kept], now, config, critical)
        starts, room = critical_starts(
            jobs, allowed, pinned, protected, capacity - held_gpus, critical
        )
    must_run, shadow = starving(
        jobs, allowed, pinned, protected, sharing, objective, room, remaining_s
    )
    must_run |= starts
    restarts: list[bool] = []  # per job: some size restarts or moves it (discount read)
    for index, (job, goodput) in enumerate(zip(jobs, goodputs, strict=True)):
        row = reusable[index]
        if row is not None and index not in must_run and shadow is None:
            problem.views.append(row.view)
            problem.by_job.append([])
            restarts.append(row.restarts)
            continue
        reusable[index] = None
        current = job.placement if job.state.holds_resources else ()
        guest_of = guests_of.get(job.id)
        sizes = allowed[index]
        if pinned[index] and current:
            sizes = [len(current)]
        elif index in must_run or (protected[index] and current):
            sizes = [n for n in sizes if n > 0] or [len(current)]
        elif shadow is not None and not current and not ends_by(job, shadow, now, remaining_s):
            # A starving job waits for protected gangs to end: nobody starts meanwhile who
            # would still hold GPUs then (EASY backfilling), so the GPUs they free accumulate
            # for it (no starvation behind a stream).
            sizes = [0]
        if goodput is None:  # priced by its size alone: jobs of one size list share it
            key = tuple(sizes)
            cached = linear.get(key)
            if cached is None:
                cached = linear[key] = size_choices(job, None, sizes, fair_share, per_node)
            choices = cached
        else:
            choices = size_choices(job, goodput, sizes, fair_share, per_node)
        problem.views.append(JobView(job, goodput, current, choices, guest_of, pinned[index]))
        problem.by_job.append([])
        stays = len(current) if guest_of is None else -1
        # Some size but 0 and the one it runs at (sizes are distinct): counted, not scanned.
        restarts.append(len(sizes) - sizes.count(0) - (stays > 0 and stays in sizes) > 0)
    columns = _columns(problem.views, reusable, objective, kept, restarts)
    first = rows.columns_end(kept) if rows is not None else 0
    for job_columns, count in zip(problem.by_job, map(len, columns), strict=True):
        job_columns.extend(range(first, first + count))
        first += count
    flat = [column for job_columns in columns for column in job_columns]
    if rows is not None:
        ends = rows.ends(kept)
        problem.views = [*rows.views[:kept], *problem.views]
        problem.columns = [*rows.columns[: rows.columns_end(kept)], *flat]
        problem.by_job = [
            *(list(range(start, end)) for start, end in zip([0, *ends], ends, strict=False)),
            *problem.by_job,
        ]
        fresh = [
            row.until
            if row is not None
            else steady_until(job, goodput, guests_of.get(job.id), now, config)
            for job, goodput, row in zip(jobs, goodputs, reusable, strict=True)
        ]
        # Fresh steady rows, and reused rows renamed to a new place (kept so renamed: the
        # next round finds them named for where they stand, unless the order moves again).
        rows.note(
            [
                JobRow(job, until, view, allowed[i], pinned[i], protected[i], restarts[i], built)
                if row is None
                else JobRow._make((*row[:-1], built))  # row._replace(columns=built), faster
                for i, (job, until, view, built, row) in enumerate(
                    zip(jobs, fresh, problem.views[kept:], columns, reusable, strict=True)
                )
                if (row is None and until > now) or (row is not None and built is not row.columns)
            ],
            whole_jobs,
        )
        until = rows.until(kept) + fresh
        rows.keep(memo_key, whole_jobs, until, problem.views, problem.columns, problem.by_job)
    else:
        problem.columns = flat
    return problem


def _columns(
    views: list[JobView],
    reusable: list[JobRow | None],
    objective: Objective,
    first_job: int,
    restarts: list[bool],
) -> list[tuple[Column, ...]]:
    """Each job's off and exclusive columns: a reused row's own (renamed to the job's place
    where it moved), the others priced in one pass (:func:`_priced_columns`)."""
    fresh = [index for index, row in enumerate(reusable) if row is None]
    counts = [len(views[index].choices.sizes) for index in fresh]
    priced = (
        _priced_columns(
            [views[index] for index in fresh],
            counts,
            objective,
            [first_job + index for index in fresh],
            [restarts[index] for index in fresh],
        )
        if fresh
        else []
    )
    found: list[tuple[Column, ...]] = []
    at = 0
    chunks = iter(counts)
    for index, row in enumerate(reusable):
        if row is None:
            count = next(chunks)
            found.append(tuple(priced[at : at + count]))
            at += count
            continue
        owner = first_job + index
        built = row.columns
        found.append(built if built[0].job == owner else _renamed(built, owner))
    return found


def _renamed(columns: tuple[Column, ...], owner: int) -> tuple[Column, ...]:
    head = (owner,)
    return tuple([Column._make(head + column[1:]) for column in columns])


def _priced_columns(
    views: list[JobView],
    counts: list[int],
    objective: Objective,
    owners: list[int],
    restarts: list[bool],
) -> list[Column]:
    """The jobs' off and exclusive columns, priced in one vector pass (the arithmetic of
    pricing each job alone); ``owners``: each one's place. ``restarts``: per job, whether
    some size other than 0 restarts or moves it. Where none does (a rigid gang running at
    its size), the discount scales only its off column's speedup, 0, so it is not computed."""
    sizes_all = np.concatenate([view.choices.sizes for view in views])
    speedups_all = np.concatenate([view.choices.speedups for view in views])
    repeats = np.array(counts)
    held, weights, discounts = np.array(
        [
            [len(v.current) if v.guest_of is None else -1 for v in views],
            [objective.weight(view.job) for view in views],
            [
                objective.discount(view.job) if moves else 1.0
                for view, moves in zip(views, restarts, strict=True)
            ],
        ]
    ).repeat(repeats, axis=1)  # a row per field (GPUs held as floats: exact)
    costs = objective.costs_many(weights, discounts, speedups_all, sizes_all != held)
    owned = np.array(owners).repeat(repeats)
    # ``Column._make`` of whole tuples: ``Column(...)`` without its per-field defaults.
    return list(
        map(
            Column._make,
            (
                (owner, EXCLUSIVE if size > 0 else OFF, size, cost, speedup, *_NO_COTENANCY)
                for owner, size, speedup, cost in zip(
                    owned.tolist(),
                    sizes_all.tolist(),
                    speedups_all.tolist(),
                    costs.tolist(),
                    strict=True,
                )
            ),
        )
    )


def size_costs(
    problem: Problem, job: int, all_costs: np.ndarray
) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """The job's cheapest column of each GPU count, guests aside, as (sizes ascending, costs,
    column indices): what the dynamic program chooses among (a host column competes with
    the exclusive column of its size; on a tie the exclusive one, listed first, is kept).
    ``all_costs``: every column's cost, in column order."""
    indices = problem.by_job[job]
    sizes_now = problem.views[job].choices.sizes
    if len(indices) == len(sizes_now):  # its off and exclusive columns only: consecutive
        return sizes_now, all_costs[indices[0] : indices[-1] + 1], indices
    best: dict[int, int] = {}
    for index in indices:
        column = problem.columns[index]
        if column.kind == GUEST:
            continue
        kept = best.get(column.gpus)
        if kept is None or column.cost < problem.columns[kept].cost:
            best[column.gpus] = index
    sizes = sorted(best)
    indices = [best[size] for size in sizes]
    costs = np.array([problem.columns[i].cost for i in indices])
    return np.array(sizes, dtype=np.int64), costs, indices
