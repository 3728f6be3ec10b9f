"""Prometheus metrics, prefix ``jigsaw_``, never labelled per job (cardinality stays fixed).

Job counts are read from the database at scrape time, so every API replica reports the same
numbers. Scheduler metrics (rounds, preemptions, waits) come from the process that runs the
scheduler loop (the server when ``JIGSAW_SCHEDULER=embedded``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import cast

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import Engine, func, select
from sqlalchemy.exc import SQLAlchemyError

from api.models import jobs
from jigsaw.model.lifecycle import JobState

log = logging.getLogger(__name__)

WAIT_BUCKETS = (1, 5, 15, 60, 300, 900, 3600, 4 * 3600, 12 * 3600, 24 * 3600, float("inf"))
ROUND_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, float("inf"))


class JobGauges(Collector):
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def describe(self) -> Iterator[GaugeMetricFamily]:
        # Names only: registering must not query a database that may not be migrated yet.
        yield GaugeMetricFamily("jigsaw_jobs_pending", "Jobs waiting for GPUs")
        yield GaugeMetricFamily("jigsaw_jobs_running", "Jobs holding GPUs")

    def collect(self) -> Iterator[GaugeMetricFamily]:
        counts = dict.fromkeys(JobState, 0)
        query = select(jobs.c.state, func.count()).group_by(jobs.c.state)
        try:
            with self._engine.connect() as conn:
                for row in conn.execute(query):
                    state, count = cast("tuple[str, int]", tuple(row))
                    counts[JobState(state)] = int(count)
        except SQLAlchemyError as error:
            log.warning("metrics: could not count jobs: %s", error)
            return
        waiting = sum(counts[s] for s in (JobState.PENDING, JobState.PREEMPTED, JobState.RETRYING))
        running = counts[JobState.ADMITTED] + counts[JobState.RUNNING]
        yield GaugeMetricFamily(
            "jigsaw_jobs_pending", "Jobs waiting for GPUs (pending, preempted, retrying)", waiting
        )
        yield GaugeMetricFamily(
            "jigsaw_jobs_running", "Jobs holding GPUs (admitted, running)", running
        )


class Metrics:
    def __init__(self, engine: Engine) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.submissions = Counter(
            "jigsaw_submissions", "Jobs accepted by POST /api/v1/jobs", registry=self.registry
        )
        self.preemptions = Counter(
            "jigsaw_preemptions", "Preemptions the scheduler applied", registry=self.registry
        )
        self.wait_time = Histogram(
            "jigsaw_job_wait_seconds",
            "Submission to first admission",
            buckets=WAIT_BUCKETS,
            registry=self.registry,
        )
        self.round_latency = Histogram(
            "jigsaw_scheduler_round_seconds",
            "Wall time of one scheduling round",
            buckets=ROUND_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(JobGauges(engine))

    def render(self) -> bytes:
        return generate_latest(self.registry)
