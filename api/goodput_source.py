"""The service's goodput source: what each job has measured, from its lease reports.

Pollux sizes jobs from what their agents measure; in the service the agents are the workers
and what they measure arrives in lease reports. Two halves:

- :class:`StepTimeRecorder`, a scheduling cycle ``on_event`` hook: each ``Progressed`` or
  ``Finished`` report of a running gang becomes one step-time observation of the shape it
  ran, ``(nodes, replicas, samples per worker)``. The step time is the lease's measured
  iteration time (``LeaseTimings.iteration_s``, else ``1 / iterations_per_s``), or, for an
  executor that reports progress only (the simulated one), the iterations done between two
  reports of the same gang; the sync time is the ranks' mean measured sync (0 when not
  reported). Observations of one shape are averaged (over the last ``WINDOW`` reports) into
  one row of ``job_step_times``, so the scheduler reads them each round and a new leader
  inherits them.
- :class:`LeaseGoodputSource`, the :class:`~jigsaw.goodput.source.GoodputSource` the policy
  builder hands every policy that uses one: per elastic job, the one step-time model
  (:func:`jigsaw.goodput.step_time.fit_step_times`) fitted to its rows, its whole-model
  gradient noise from the per-block statistics the cycle keeps on the job
  (``Job.block_noise``), and its batch limits. A job that has measured nothing gets no model
  (``JobGoodput.model is None``), as in Pollux's simulator.

Worker batches: a service worker runs its batch in one pass (no gradient accumulation), and
the spec names no memory bound, so a worker may take from 1 sample up to the largest global
batch the job allows, as jigsaw's elastic rule assumes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy import Engine, and_, insert, select, update
from sqlalchemy.exc import SQLAlchemyError

from api.db import autocommit, writer
from api.models import job_step_times
from api.store import SqlStore
from jigsaw.goodput.model import BatchLimits, GoodputModel
from jigsaw.goodput.noise import GradientNoise
from jigsaw.goodput.source import JobGoodput
from jigsaw.goodput.step_time import StepObservation, StepTimeModel, fit_step_times
from jigsaw.model.domain import Job
from jigsaw.model.errors import JobNotFoundError
from jigsaw.model.executor_events import ExecutorEvent, Finished, Progressed
from jigsaw.model.lease_outcome import LeaseOutcome
from jigsaw.model.lifecycle import JobState

log = logging.getLogger(__name__)

WINDOW = 20
"""A shape's stored step time is the mean of about its last this many reports."""
SYNC_CAP = 0.999
"""A reported sync at or above the step is clipped below it (the model needs compute > 0)."""

Shape = tuple[int, int, int]
"""(nodes, replicas, samples per worker)."""


def service_limits(job: Job) -> BatchLimits:
    """The batches a service job allows: its global range, 1 sample up to the largest global
    batch per worker, one pass per iteration."""
    lowest, highest = job.spec.batch_range
    return BatchLimits(lowest, highest, 1, highest, accumulation=False)


def shape_of(job: Job) -> Shape | None:
    """The shape a running gang runs now; ``None`` when it holds no GPUs."""
    if not job.placement:
        return None
    nodes = len({gpu[0] for gpu in job.placement})
    return nodes, len(job.placement), job.current_worker_batch


@dataclass(frozen=True, slots=True)
class _LastReport:
    shape: Shape
    attempt: int
    run_started_at: float | None
    done: float
    at: float


class StepTimeRecorder:
    """The cycle's ``on_event`` hook that turns lease reports into step-time rows. Never
    raises into the cycle (a measurement lost is a round of knowledge lost, nothing more)."""

    def __init__(self, store: SqlStore, engine: Engine) -> None:
        self._store = store
        self._writer = writer(engine)
        self._last: dict[str, _LastReport] = {}

    def __call__(self, event: ExecutorEvent) -> None:
        if not isinstance(event, Progressed | Finished):
            return
        try:
            self._observe(event)
        except (SQLAlchemyError, JobNotFoundError) as error:
            log.warning("could not record the step time of %s: %s", event.job_id, error)

    def _observe(self, event: Progressed | Finished) -> None:
        job = self._store.get(event.job_id)
        shape = shape_of(job)
        if job.state is not JobState.RUNNING or shape is None:
            self._last.pop(event.job_id, None)
            return
        step_s = _measured_step_s(event.outcome)
        previous = self._last.get(job.id)
        same_run = previous is not None and (
            previous.shape,
            previous.attempt,
            previous.run_started_at,
        ) == (shape, job.attempt, job.run_started_at)
        if step_s is None and same_run and previous is not None:
            iterations = event.iterations_done - previous.done
            if iterations > 0 and event.at > previous.at:
                step_s = (event.at - previous.at) / iterations
        self._last[job.id] = _LastReport(
            shape, job.attempt, job.run_started_at, event.iterations_done, event.at
        )
        if isinstance(event, Finished):
            self._last.pop(job.id, None)
        if step_s is None or not step_s > 0:
            return
        sync_s = min(_measured_sync_s(event.outcome), SYNC_CAP * step_s)
        self.record(job.id, shape, step_s, sync_s, event.at)

    def record(self, job_id: str, shape: Shape, step_s: float, sync_s: float, at: float) -> None:
        """Fold one observation into the shape's row (a running mean over ``WINDOW``)."""
        nodes, replicas, atomic = shape
        key = and_(
            job_step_times.c.job_id == job_id,
            job_step_times.c.nodes == nodes,
            job_step_times.c.replicas == replicas,
            job_step_times.c.atomic_bsz == atomic,
        )
        with self._writer.begin() as conn:
            row = conn.execute(
                select(
                    job_step_times.c.step_s, job_step_times.c.sync_s, job_step_times.c.reports
                ).where(key)
            ).one_or_none()
            if row is None:
                conn.execute(
                    insert(job_step_times).values(
                        job_id=job_id,
                        nodes=nodes,
                        replicas=replicas,
                        atomic_bsz=atomic,
                        step_s=step_s,
                        sync_s=sync_s,
                        reports=1,
                        updated_at=at,
                    )
                )
                return
            weight = min(row.reports, WINDOW - 1)
            conn.execute(
                update(job_step_times)
                .where(key)
                .values(
                    step_s=(row.step_s * weight + step_s) / (weight + 1),
                    sync_s=(row.sync_s * weight + sync_s) / (weight + 1),
                    reports=row.reports + 1,
                    updated_at=at,
                )
            )


def _measured_step_s(outcome: LeaseOutcome | None) -> float | None:
    if outcome is None:
        return None
    if outcome.timings is not None and outcome.timings.iteration_s:
        return outcome.timings.iteration_s
    if outcome.iterations_per_s:
        return 1.0 / outcome.iterations_per_s
    return None


def _measured_sync_s(outcome: LeaseOutcome | None) -> float:
    if outcome is None or not outcome.ranks:
        return 0.0
    return max(0.0, sum(rank.sync_s for rank in outcome.ranks) / len(outcome.ranks))


class LeaseGoodputSource:
    """What each elastic job has measured in the service (see the module docstring)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = autocommit(engine)
        self._fits: dict[str, tuple[tuple[StepObservation, ...], StepTimeModel]] = {}

    def observations(self, job_id: str) -> tuple[StepObservation, ...]:
        columns = job_step_times.c
        with self._engine.connect() as conn:
            rows = conn.execute(
                select(
                    columns.nodes,
                    columns.replicas,
                    columns.atomic_bsz,
                    columns.step_s,
                    columns.sync_s,
                )
                .where(columns.job_id == job_id)
                .order_by(columns.nodes, columns.replicas, columns.atomic_bsz)
            ).all()
        return tuple(
            StepObservation(
                min(r.nodes, r.replicas),
                r.replicas,
                float(r.atomic_bsz),
                r.step_s,
                min(r.sync_s, SYNC_CAP * r.step_s),
            )
            for r in rows
        )

    def job_goodput(self, job: Job, now: float) -> JobGoodput | None:
        del now
        if not job.spec.is_elastic:
            return None
        limits = service_limits(job)
        observations = self.observations(job.id)
        if not observations:
            self._fits.pop(job.id, None)
            return JobGoodput(limits, None, 0)
        model = GoodputModel(
            self._step_times(job.id, observations), GradientNoise.of_blocks(job.block_noise), limits
        )
        return JobGoodput(limits, model, max(o.replicas for o in observations))

    def _step_times(self, job_id: str, observations: tuple[StepObservation, ...]) -> StepTimeModel:
        """Refitted only when the job's rows changed."""
        cached = self._fits.get(job_id)
        if cached is None or cached[0] != observations:
            cached = self._fits[job_id] = (observations, fit_step_times(observations))
        return cached[1]
