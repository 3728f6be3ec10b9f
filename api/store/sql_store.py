"""The SQL implementation of the core's ``Store`` seam (Postgres in production, SQLite embedded).

Same semantics as :class:`jigsaw.scheduling.memstore.InMemoryStore`
(``tests/api/test_store_contract.py``
runs one suite against all three). ``save`` is one guarded UPDATE::

    UPDATE jobs SET ..., version = version + 1
     WHERE id = :id AND version = :expected
       AND state IN (sources_of(new_state))                   -- only for a transition
       AND (SELECT epoch FROM scheduler_leader) = :epoch      -- only for a scheduler's store

and the transition's event is inserted in the same transaction, so the database refuses what
the lifecycle table refuses even if the code above it is wrong.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from operator import attrgetter
from typing import Any

from sqlalchemy import Connection, Engine, Insert, Select, bindparam, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from api.db import autocommit, is_sqlite, single_statement_writer, writer
from api.models import allocations, job_events, job_log_lines, jobs, scheduler_leader
from api.store import scheduler_records
from api.store.codec import event_from_row, event_log_line, event_values, job_from_row, job_values
from api.store.errors import StaleEpochError
from jigsaw.model.domain import Job, JobEvent
from jigsaw.model.errors import ConflictError, JobNotFoundError
from jigsaw.model.lifecycle import TERMINAL_STATES, JobState, sources_of
from jigsaw.model.reasons import ReasonCode
from jigsaw.scheduling.active_sides import ActiveSides, split_sides
from jigsaw.scheduling.seams import parsed_sort

_ARRIVAL_ORDER = attrgetter("submitted_at", "id")

_TERMINAL = [state.value for state in TERMINAL_STATES]


class SqlStore:
    def __init__(self, engine: Engine, *, epoch: int | None = None) -> None:
        self._engine = engine
        self._writer = writer(engine)
        self._autocommit = autocommit(engine)
        self._single_statement = single_statement_writer(engine)
        self._one_statement_add = not is_sqlite(engine)
        self._epoch = epoch
        self._gpu_totals: tuple[float, scheduler_records.GpuTotals] | None = None

    @property
    def engine(self) -> Engine:
        return self._engine

    @property
    def epoch(self) -> int | None:
        """The leadership epoch this store's writes are fenced with (``None``: not fenced)."""
        return self._epoch

    def with_epoch(self, epoch: int | None) -> SqlStore:
        return SqlStore(self._engine, epoch=epoch)

    # -- Store seam ---------------------------------------------------------------------
    def add(
        self, job: Job, event: JobEvent, *, then: Callable[[Connection], None] | None = None
    ) -> Job:
        """Insert a new job; ``then`` runs in the same transaction (idempotency records)."""
        row = {
            "id": job.id,
            **job_values(job),
            "version": job.version,
            "epoch": self._epoch,
            "updated_at": time.time(),
        }
        try:
            if self._one_statement_add and not job.placement:
                self._add_in_one_statement(row, event, then)
                return job
            with self._writer.begin() as conn:
                conn.execute(_INSERT_JOB, row)
                if job.placement:
                    self._write_allocations(conn, job, previous=())
                self._record(conn, event)
                if then is not None:
                    then(conn)
        except IntegrityError:
            raise ConflictError(f"job {job.id} already exists") from None
        return job

    def _add_in_one_statement(
        self, row: dict[str, Any], event: JobEvent, then: Callable[[Connection], None] | None
    ) -> None:
        """Postgres: job, event and log line in one round trip. Without ``then`` the statement
        commits by itself (autocommit); with it, both share one transaction."""
        params = _new_job_params(row, event, self._epoch)
        with (self._writer if then is not None else self._single_statement).begin() as conn:
            conn.execute(_NEW_JOB, params)
            if then is not None:
                then(conn)

    def get(self, job_id: str) -> Job:
        with self._autocommit.connect() as conn:
            row = conn.execute(_GET_JOB, {"job_id": job_id}).mappings().first()
        if row is None:
            raise JobNotFoundError(job_id)
        return job_from_row(row)

    def active_jobs(self) -> list[Job]:
        query = (
            select(jobs)
            .where(jobs.c.state.not_in(_TERMINAL))
            .order_by(jobs.c.submitted_at, jobs.c.id)
        )
        with self._autocommit.connect() as conn:
            active = [job_from_row(row) for row in conn.execute(query).mappings()]
        # Sorted once more in Python: the database's collation of ids need not be Python's
        # string order, and the snapshot's order must not depend on the database's locale.
        active.sort(key=_ARRIVAL_ORDER)
        return active

    def active_sides(self) -> ActiveSides:
        return split_sides(self.active_jobs())

    def list_jobs(
        self,
        *,
        states: Iterable[JobState] | None = None,
        user: str | None = None,
        queue: str | None = None,
        name: str | None = None,
        since: float | None = None,
        sort: str = "submitted",
        limit: int = 100,
        offset: int = 0,
    ) -> list[Job]:
        key, descending = parsed_sort(sort)
        query = _filtered(select(jobs), states, user, queue, name, since)
        order = [_SORT_COLUMNS[key], jobs.c.submitted_at, jobs.c.id]
        if key == "submitted":
            order = order[1:]
        query = query.order_by(*(c.desc() if descending else c.asc() for c in order))
        with self._autocommit.connect() as conn:
            rows = conn.execute(query.limit(limit).offset(offset)).mappings()
            return [job_from_row(row) for row in rows]

    def count_jobs(
        self,
        *,
        states: Iterable[JobState] | None = None,
        user: str | None = None,
        queue: str | None = None,
        name: str | None = None,
        since: float | None = None,
    ) -> int:
        query = _filtered(select(func.count()).select_from(jobs), states, user, queue, name, since)
        with self._autocommit.connect() as conn:
            return int(conn.execute(query).scalar_one())

    def save(self, job: Job, *, expected_version: int, event: JobEvent | None = None) -> Job:
        values = job_values(job)
        statement = update(jobs).where(jobs.c.id == job.id, jobs.c.version == expected_version)
        if event is not None:
            sources = [state.value for state in sources_of(event.to_state)]
            statement = statement.where(jobs.c.state.in_(sources))
        if self._epoch is not None:
            statement = statement.where(_leader_epoch() == self._epoch)
        statement = statement.values(
            **values, version=jobs.c.version + 1, epoch=self._epoch, updated_at=time.time()
        )
        with self._writer.begin() as conn:
            if conn.execute(statement).rowcount != 1:
                raise self._why_refused(conn, job, expected_version, event)
            self._write_allocations(conn, job)
            if event is not None:
                self._record(conn, event)
        return _with_version(job, expected_version + 1)

    def mark_unschedulable(self, job: Job, reason: str, at: float, actor: str) -> Job | None:
        """Record why a waiting job cannot start (its state stays; the event says
        ``PENDING -> PENDING`` with the reason). None when the job moved meanwhile."""
        statement = (
            update(jobs)
            .where(jobs.c.id == job.id, jobs.c.version == job.version)
            .where(jobs.c.state == job.state.value)
            .values(reason=reason, version=jobs.c.version + 1, updated_at=time.time())
        )
        if self._epoch is not None:
            statement = statement.where(_leader_epoch() == self._epoch)
        with self._writer.begin() as conn:
            if conn.execute(statement).rowcount != 1:
                return None
            code = ReasonCode.UNSCHEDULABLE
            self._record(conn, JobEvent(job.id, job.state, job.state, reason, at, actor, code))
        return _with_version(replace(job, reason=reason), job.version + 1)

    # -- what the scheduler records, for the views --------------------------------------
    def leader_state(self) -> scheduler_records.LeaderState | None:
        return scheduler_records.leader_state(self._engine)

    def gpu_totals(self, *, max_age_s: float = 0.0) -> scheduler_records.GpuTotals:
        """The recorded inventory's GPU counts; ``max_age_s`` lets a caller take an answer
        up to that old (submissions do: the inventory changes on node joins and losses)."""
        now = time.monotonic()
        cached = self._gpu_totals
        if cached is not None and now - cached[0] <= max_age_s:
            return cached[1]
        totals = scheduler_records.gpu_totals(self._engine)
        self._gpu_totals = (now, totals)
        return totals

    def observed_rates(self, job_ids: Iterable[str]) -> dict[str, float]:
        return scheduler_records.observed_rates(self._engine, list(job_ids))

    def utilization_since(self, start: float) -> list[scheduler_records.UtilizationPoint]:
        return scheduler_records.utilization_since(self._engine, start)

    def events(self, job_id: str) -> list[JobEvent]:
        query = select(job_events).where(job_events.c.job_id == job_id).order_by(job_events.c.id)
        with self._autocommit.connect() as conn:
            rows = list(conn.execute(query).mappings())
            if not rows and not _exists(conn, job_id):
                raise JobNotFoundError(job_id)
        return [event_from_row(row) for row in rows]

    # -- internals ----------------------------------------------------------------------
    def _record(self, conn: Connection, event: JobEvent) -> None:
        conn.execute(_INSERT_EVENT, event_values(event, self._epoch))
        conn.execute(
            _INSERT_LOG, {"job_id": event.job_id, "at": event.at, "line": event_log_line(event)}
        )

    def _write_allocations(
        self, conn: Connection, job: Job, previous: tuple[tuple[int, int], ...] | None = None
    ) -> None:
        """Keep ``allocations`` equal to ``jobs.placement`` (rewritten only when it changed)."""
        if previous is None:
            previous = tuple(
                (row.node, row.gpu) for row in conn.execute(_ALLOCATIONS_OF, {"job_id": job.id})
            )
        if previous == tuple(job.placement):
            return
        conn.execute(allocations.delete().where(allocations.c.job_id == job.id))
        if job.placement:
            conn.execute(
                insert(allocations),
                [
                    {"job_id": job.id, "rank": rank, "node": node, "gpu": gpu}
                    for rank, (node, gpu) in enumerate(job.placement)
                ],
            )

    def _why_refused(
        self, conn: Connection, job: Job, expected_version: int, event: JobEvent | None
    ) -> Exception:
        row = conn.execute(select(jobs.c.version, jobs.c.state).where(jobs.c.id == job.id)).first()
        if row is None:
            return JobNotFoundError(job.id)
        if self._epoch is not None:
            current = conn.execute(select(scheduler_leader.c.epoch)).scalar()
            if current != self._epoch:
                return StaleEpochError(self._epoch, current)
        if row.version != expected_version:
            return ConflictError(
                f"job {job.id} changed meanwhile (version {row.version}, "
                f"expected {expected_version})"
            )
        target = event.to_state if event is not None else job.state
        return ConflictError(f"job {job.id} is {row.state}, not a source of {target}")


# Built once, as constants: executing a constant statement with a parameter dict skips the
# per-call statement construction and coercion that ``.values(**row)`` costs (see
# docs/BENCHMARKS.md).
_INSERT_JOB = insert(jobs)
_INSERT_EVENT = insert(job_events)
_INSERT_LOG = insert(job_log_lines)
_ALLOCATIONS_OF = (
    select(allocations.c.node, allocations.c.gpu)
    .where(allocations.c.job_id == bindparam("job_id"))
    .order_by(allocations.c.rank)
)
_GET_JOB = select(jobs).where(jobs.c.id == bindparam("job_id"))


_EVENT_COLUMNS = ("job_id", "from_state", "to_state", "reason", "at", "actor", "epoch", "code")


def _new_job_statement() -> Insert:
    """Postgres: the job, its first event and its log line in ONE statement::

        WITH new_job AS (INSERT INTO jobs ...), new_event AS (INSERT INTO job_events ...)
        INSERT INTO job_log_lines ...

    A new job's row names every column of ``jobs`` (the codec's values and the four the
    store sets), so one statement, with named parameters, serves every submission.
    Foreign keys are checked at the end of the statement, when all three rows exist."""
    new_job = insert(jobs).values({name: bindparam(f"job__{name}") for name in jobs.c.keys()})
    new_event = insert(job_events).values(
        {name: bindparam(f"event__{name}") for name in _EVENT_COLUMNS}
    )
    return (
        insert(job_log_lines)
        .values(job_id=bindparam("job__id"), at=bindparam("event__at"), line=bindparam("line"))
        .add_cte(new_job.cte("new_job"))
        .add_cte(new_event.cte("new_event"))
    )


_NEW_JOB = _new_job_statement()


def _new_job_params(row: dict[str, Any], event: JobEvent, epoch: int | None) -> dict[str, Any]:
    values = event_values(event, epoch)
    return {
        **{f"job__{name}": value for name, value in row.items()},
        **{f"event__{name}": values[name] for name in _EVENT_COLUMNS},
        "line": event_log_line(event),
    }


def _exists(conn: Connection, job_id: str) -> bool:
    return conn.execute(select(jobs.c.id).where(jobs.c.id == job_id)).first() is not None


def _leader_epoch() -> Any:
    return select(scheduler_leader.c.epoch).where(scheduler_leader.c.id == 1).scalar_subquery()


def _filtered(
    query: Select[Any],
    states: Iterable[JobState] | None,
    user: str | None,
    queue: str | None,
    name: str | None = None,
    since: float | None = None,
) -> Select[Any]:
    if states is not None:
        query = query.where(jobs.c.state.in_([JobState(state).value for state in states]))
    if user is not None:
        query = query.where(jobs.c.username == user)
    if queue is not None:
        query = query.where(jobs.c.queue == queue)
    if name is not None:
        query = query.where(jobs.c.name.ilike(_like_pattern(name), escape="\\"))
    if since is not None:
        query = query.where(jobs.c.submitted_at >= since)
    return query


def _like_pattern(name: str) -> str:
    """The ``name`` filter (``*`` for any run of characters, the rest literal) as a LIKE
    pattern: the same matches as :func:`~jigsaw.scheduling.seams.name_matcher`."""
    literal = name.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return literal.replace("*", "%")


_SORT_COLUMNS = {
    "submitted": jobs.c.submitted_at,
    "name": jobs.c.name,
    "user": jobs.c.username,
    "queue": jobs.c.queue,
    "state": jobs.c.state,
    "priority": jobs.c.priority,
}
"""The column :meth:`SqlStore.list_jobs` sorts by, per key of ``JOB_SORT_KEYS``."""


def _with_version(job: Job, version: int) -> Job:
    return replace(job, version=version)
