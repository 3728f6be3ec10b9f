"""The last round's leading jobs and their columns, so that a round builds only the rest.

A job's off and exclusive columns (:func:`~.configurations.exclusive_problem`) depend on the
round's clock in two ways only: its pins (a hold or minimum run ends at a known time) and
the discount of a configuration that restarts it. For a *steady* job neither moves between
events: a rigid job that holds its GPUs (its only configuration that restarts it is off,
whose speedup is 0, so the discount never counts) or a rigid job that has never run, whose
launch is free (``launch_s`` 0: its discount is ``age / age``, exactly 1). Its weight reads
only its own fields (aging off). So while the job is the same object, the fair share, the
GPUs and the options are the same, and no pin of it has ended, its view and columns are
the ones built last round.

The round's jobs come in one order (running, then waiting, each by arrival), and a
column names its job by its place in that order; so the memo keeps the leading run of
steady jobs that are the very objects of the last round at the same places (their views,
columns and column indices whole), and behind it each steady job's row wherever it now
stands (:meth:`RowMemo.rows_of`: its view, the facts the round's pins read, and its columns,
renamed to its new place where it moved, and kept so renamed); the round builds the rest.
With the starvation pin or aging on it keeps nothing (their columns read the clock); the
critical path is part of the memo's key (rows hold while it is the same), and its waiting
jobs are always built (whether they must start reads the other jobs).
tests/core/policies/test_gang_offers.py and tests/core/policies/test_row_memo.py hold the
kept policy to one that builds every round afresh.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Hashable, Sequence
from typing import Any, NamedTuple

from jigsaw.goodput.source import JobGoodput
from jigsaw.model.domain import Job
from jigsaw.model.lifecycle import JobState
from jigsaw.policies.allocator.config import JigsawConfig


class JobRow(NamedTuple):
    """One steady job's row as a round built it: what the next round may take whole, at the
    job's new place in the order (:meth:`RowMemo.rows_of`)."""

    job: Job
    until: float
    """Until when it holds (:func:`steady_until`)."""
    view: Any
    """Its ``JobView``."""
    allowed: list[int]
    pinned: bool
    protected: bool
    restarts: bool
    """Some size it may take restarts or moves it (its discount is read)."""
    columns: tuple[Any, ...]
    """Its columns (``Column``), naming its place in the round that built them."""


class RowMemo:
    """The last round's jobs, views and columns, and until when each job's are valid; and
    each steady job's row, wherever it stands in the order."""

    __slots__ = (
        "_columns_end",
        "_jobs",
        "_key",
        "_rows",
        "_until",
        "columns",
        "reused",
        "views",
    )

    def __init__(self) -> None:
        self._key: Hashable = None
        self._jobs: list[Job] = []
        self._until: list[float] = []
        """Per job: when its pins may change (``-inf``: not steady, never reused)."""
        self._columns_end: list[int] = []
        self.views: list[Any] = []
        """The kept jobs' views (``JobView``; this module sits below the one that defines
        it)."""
        self.columns: list[Any] = []
        """Their columns (``Column``)."""
        self.reused = 0
        """Jobs whose view and columns a round took from the memo (a counter, for tests)."""
        self._rows: dict[int, JobRow] = {}
        """Steady jobs' rows by job object (checked by identity on reading)."""

    def kept(
        self,
        jobs: Sequence[Job],
        guests_of: dict[str, str],
        now: float,
        key: Hashable,
    ) -> int:
        """How many leading jobs' views and columns the last round's are."""
        if key != self._key:
            return 0
        kept = 0
        # A kept job was steady, so no guest (``steady_until``): one that is a guest now differs.
        for mine, theirs, until in zip(self._jobs, jobs, self._until, strict=False):
            if mine is not theirs or not now < until or theirs.id in guests_of:
                break
            kept += 1
        self.reused += kept
        return kept

    def rows_of(
        self,
        jobs: Sequence[Job],
        guests_of: dict[str, str],
        now: float,
        key: Hashable,
        never: Collection[str],
    ) -> list[JobRow | None]:
        """Per job, its row from an earlier round where it still holds: the very job object,
        steady until after ``now``, no guest, under the same key (the memo's rows are
        dropped when the key moves), and not named in ``never`` (jobs whose columns read
        other jobs this round: the critical path's waiting ones). A job's row reads only the
        job, the key and the clock, so it holds wherever the job now stands."""
        if key != self._key:
            self._rows = {}
            return [None] * len(jobs)
        rows = self._rows
        found: list[JobRow | None] = []
        for job in jobs:
            row = rows.get(id(job))
            if (
                row is None
                or row.job is not job
                or not now < row.until
                or job.id in guests_of
                or job.id in never
            ):
                found.append(None)
            else:
                found.append(row)
        return found

    def note(self, rows: Sequence[JobRow], jobs: Sequence[Job]) -> None:
        """Keep ``rows`` (steady jobs' rows built this round); ``jobs``: the round's (rows of
        jobs gone are dropped once the memo holds more than twice as many)."""
        kept = self._rows
        if len(kept) > 2 * len(jobs) + 64:
            alive = {id(job) for job in jobs}
            kept = self._rows = {key: row for key, row in kept.items() if key in alive}
        for row in rows:
            kept[id(row.job)] = row

    def columns_end(self, kept: int) -> int:
        """How many columns the first ``kept`` jobs have."""
        return self._columns_end[kept - 1] if kept else 0

    def ends(self, kept: int) -> list[int]:
        """Where each of the first ``kept`` jobs' columns end."""
        return self._columns_end[:kept]

    def until(self, kept: int) -> list[float]:
        """Until when each of the first ``kept`` jobs' columns hold (:func:`steady_until`)."""
        return self._until[:kept]

    def keep(
        self,
        key: Hashable,
        jobs: Sequence[Job],
        until: list[float],
        views: Sequence[Any],
        columns: Sequence[Any],
        by_job: Sequence[list[int]],
    ) -> None:
        """This round's jobs, each one's :func:`steady_until`, and its views, columns and
        each job's column indices as built (copied: co-tenancy adds to them later)."""
        self._key = key
        self._jobs = list(jobs)
        self._until = until
        self.views, self.columns = list(views), list(columns)
        self._columns_end = [indices[-1] + 1 for indices in by_job]


def usable(config: JigsawConfig) -> bool:
    """Columns may be kept at all: no starvation pin, no aging (both read the clock)."""
    return config.promote_s == math.inf and config.wait_weight <= 0


def steady_until(
    job: Job, goodput: JobGoodput | None, guest_of: str | None, now: float, config: JigsawConfig
) -> float:
    """Until when the job's view and columns stay as built at ``now`` (``-inf``: they may
    change any round): when a hold or minimum run of its current configuration ends."""
    if goodput is not None or guest_of is not None:
        return -math.inf
    if not job.state.holds_resources:
        fresh = job.attempt == 0 and job.resizes == 0 and job.attained_gpu_seconds == 0
        return math.inf if fresh and config.launch_s == 0 else -math.inf
    if len(job.placement) != job.spec.workers:
        return -math.inf  # a size it did not ask for: its own size is a restart, discounted
    if job.state is not JobState.RUNNING:
        return math.inf  # admitted: pinned until it starts, which replaces the job
    since = held_since(job)
    until = math.inf
    for hold in (config.min_hold_s, config.min_run_s):
        if hold > 0 and now < since + hold:
            until = min(until, since + hold)
    return until


def held_since(job: Job) -> float:
    """When the job's current configuration began: its start or its last resize."""
    started, resized = job.run_started_at, job.resized_at
    since = started if started is not None and started > 0.0 else 0.0
    return resized if resized is not None and resized > since else since
