"""What the scheduler writes besides job state: progress samples and log lines (from executor
reports), its own round state and heartbeat, utilization samples, and the cluster inventory."""

from __future__ import annotations

import json
import logging
import math
import time
from collections import deque
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Engine, delete, func, insert, select, update
from sqlalchemy.exc import SQLAlchemyError

from api.db import writer
from api.metrics import Metrics
from api.models import allocations, jobs, nodes, scheduler_leader, utilization_samples
from api.store import SqlStore
from api.store.telemetry import ProgressSample, Telemetry
from api.timefmt import iso
from api.unschedulable import mark_unschedulable
from jigsaw.model.cluster import Cluster
from jigsaw.model.decisions import Decision, Preempt, Start
from jigsaw.model.executor_events import ExecutorEvent, Failed, Finished, Progressed
from jigsaw.model.lease_outcome import LeaseOutcome
from jigsaw.model.lifecycle import JobState
from jigsaw.model.plan import SPBPlan
from jigsaw.scheduling.cycle import CycleReport

log = logging.getLogger(__name__)

RECENT_DECISIONS = 20
UTILIZATION_EVERY_S = 5.0
UTILIZATION_KEEP_S = 7 * 24 * 3600.0
HOLDING = [JobState.ADMITTED.value, JobState.RUNNING.value]


class LeadershipLostError(RuntimeError):
    """The round-state write found another epoch: a newer leader exists."""


class ProgressRecorder:
    """The cycle's ``on_event`` hook: one progress sample per new report, log lines at lease
    boundaries and at the end. Never raises into the cycle (telemetry is best effort)."""

    def __init__(self, store: SqlStore, telemetry: Telemetry, lease_iterations: int) -> None:
        self._store = store
        self._telemetry = telemetry
        self._lease = lease_iterations
        self._last: dict[str, tuple[float, float]] = {}

    def __call__(self, event: ExecutorEvent) -> None:
        try:
            self._record(event)
        except SQLAlchemyError as error:
            log.warning("could not record %s: %s", type(event).__name__, error)
        except Exception:  # the cycle must still fold the event in: a lost Finished is a hung job
            log.exception("could not record %s of %s", type(event).__name__, event.job_id)

    def _record(self, event: ExecutorEvent) -> None:
        match event:
            case Progressed(job_id=job_id, at=at, iterations_done=done, outcome=outcome):
                self._note_refused_noise(job_id, at, outcome)
                self._sample(job_id, at, done, outcome, final=False)
            case Finished(job_id=job_id, at=at, iterations_done=done, outcome=outcome):
                self._sample(job_id, at, done, outcome, final=True)
                self._last.pop(job_id, None)
            case Failed(job_id=job_id, at=at, reason=reason, detail=detail):
                self._telemetry.add_log_lines(job_id, at, [f"gang failed: {reason}", *detail])
                self._last.pop(job_id, None)
            case _:
                pass

    def _note_refused_noise(self, job_id: str, at: float, outcome: LeaseOutcome | None) -> None:
        """Refused gradient statistics leave a line in the job's log naming what was wrong (the
        cycle keeps the job's estimate as it was)."""
        if outcome is None or outcome.noise_refused is None:
            return
        line = f"gradient statistics refused, eta estimate kept: {outcome.noise_refused}"
        log.warning("job %s: %s", job_id, line)
        self._telemetry.add_log_lines(job_id, at, [line])

    def _sample(
        self, job_id: str, at: float, done: float, outcome: LeaseOutcome | None, *, final: bool
    ) -> None:
        previous = self._last.get(job_id)
        if previous is not None and done <= previous[0] and not final:
            return
        job = self._store.get(job_id)
        if previous is None and done <= job.iterations_done and not final:
            return
        outcome = outcome or LeaseOutcome()
        metrics = outcome.as_metrics()
        start_iteration, start_at = previous or (job.iterations_done, job.run_started_at or at)
        rate = outcome.iterations_per_s
        if rate is None and at > start_at:
            rate = (done - start_iteration) / (at - start_at)
            metrics["iterations_per_s"] = rate
        throughput = outcome.throughput
        if throughput is None and rate is not None:
            throughput = rate * job.spec.batch_size * job.spec.workers
        loss = outcome.loss if outcome.loss is not None else outcome.last_loss
        lease_ended = outcome.lease is not None
        boundary = final or lease_ended or _crosses(start_iteration, done, self._lease)
        sample = ProgressSample(
            job_id=job_id,
            attempt=job.attempt,
            iteration=done,
            at=at,
            loss=loss,
            throughput=throughput,
            plan=job.plan.depths if isinstance(job.plan, SPBPlan) else (),
            metrics=metrics,
            lease_boundary=boundary,
        )
        line = (
            _progress_line(sample, job.spec.iterations, outcome.evaluation if final else None)
            if boundary
            else None
        )
        self._telemetry.record(sample, line)
        if outcome.log_lines:
            self._telemetry.add_log_lines(job_id, at, list(outcome.log_lines))
        self._last[job_id] = (done, at)


def _crosses(before: float, after: float, lease: int) -> bool:
    return math.floor(after / lease) > math.floor(before / lease)


def _progress_line(
    sample: ProgressSample, iterations: int, evaluation: Mapping[str, float] | None
) -> str:
    """``evaluation`` is the last lease's held-out score, given only for the final line."""
    final = evaluation is not None
    parts = [f"{'finished at' if final else 'iteration'} {sample.iteration:.0f}/{iterations}"]
    if sample.loss is not None:
        parts.append(f"loss {sample.loss:.4g}")
    if sample.throughput is not None:
        parts.append(f"{sample.throughput:.1f} samples/s")
    if sample.plan:
        parts.append("plan " + ",".join(str(d) for d in sample.plan))
    if evaluation:
        shown = ("accuracy", "val_accuracy", "val_loss")
        extra = {k: v for k, v in evaluation.items() if k in shown}
        if extra:
            parts.append(json.dumps(extra))
    return " ".join(parts)


class RoundRecorder:
    """After each round: heartbeat and round state (fenced by epoch), metrics, utilization."""

    def __init__(self, engine: Engine, metrics: Metrics, epoch: int, policy: str) -> None:
        self._engine = engine
        self._writer = writer(engine)
        self._metrics = metrics
        self._epoch = epoch
        self._policy = policy
        self._recent: deque[dict[str, Any]] = deque(maxlen=RECENT_DECISIONS)
        self._last_utilization: tuple[float, int, int] | None = None
        self._last_cluster: Cluster | None = None
        self._last_purge = 0.0

    def on_decision(self, store: SqlStore, now: float, decision: Decision) -> None:
        """The cycle's ``on_decision`` hook. Never raises into the cycle: the decision is
        applied already, and the round's other decisions and its heartbeat must not be lost
        to an error in what is only its record."""
        try:
            self._record_decision(store, now, decision)
        except SQLAlchemyError as error:
            log.warning("could not record the %s of %s: %s", decision.kind, decision.job_id, error)
        except Exception:  # any error: the round goes on, the traceback goes to the log
            log.exception(
                "could not record the %s of %s; the round goes on", decision.kind, decision.job_id
            )

    def _record_decision(self, store: SqlStore, now: float, decision: Decision) -> None:
        self._recent.append(
            {"kind": decision.kind, "job_id": decision.job_id, "reason": decision.reason, "at": now}
        )
        if isinstance(decision, Preempt):
            self._metrics.preemptions.inc()
        elif isinstance(decision, Start):
            job = store.get(decision.job_id)
            if job.attempt == 1:
                self._metrics.wait_time.observe(max(now - job.submitted_at, 0.0))

    def after_round(self, report: CycleReport, cluster: Cluster) -> None:
        self._metrics.round_latency.observe(report.latency_s)
        decisions = [{**entry, "at": iso(entry["at"])} for entry in self._recent]
        with self._writer.begin() as conn:
            written = conn.execute(
                update(scheduler_leader)
                .where(scheduler_leader.c.id == 1, scheduler_leader.c.epoch == self._epoch)
                .values(
                    round=scheduler_leader.c.round + 1,
                    heartbeat_at=time.time(),
                    policy=self._policy,
                    last_round_at=report.at,
                    last_round_latency_s=report.latency_s,
                    last_decisions=decisions,
                )
            ).rowcount
        if written != 1:
            raise LeadershipLostError(f"epoch {self._epoch} is no longer the leader's")
        self._write_cluster(cluster)
        self._sample_utilization(report.at, cluster.num_gpus)
        if report.snapshot is not None:
            store = SqlStore(self._engine, epoch=self._epoch)
            mark_unschedulable(
                store, report.snapshot.waiting, cluster.num_gpus, report.at, "scheduler"
            )

    def _write_cluster(self, cluster: Cluster) -> None:
        if cluster == self._last_cluster:
            return
        now = time.time()
        rows = [
            {
                "index": node.index,
                "name": node.name,
                "num_gpus": node.num_gpus,
                "gpu_type": node.gpu_type,
                "gpu_memory_bytes": node.gpu_memory_bytes,
                "alive": node.alive,
                "updated_at": now,
            }
            for node in cluster.nodes
        ]
        with self._writer.begin() as conn:
            conn.execute(delete(nodes))
            if rows:
                conn.execute(insert(nodes), rows)
        self._last_cluster = cluster

    def _sample_utilization(self, now: float, total: int) -> None:
        busy_query = select(func.count()).select_from(
            select(allocations.c.node, allocations.c.gpu)
            .join(jobs, jobs.c.id == allocations.c.job_id)
            .where(jobs.c.state.in_(HOLDING))
            .distinct()
            .subquery()
        )
        with self._engine.connect() as conn:
            busy = int(conn.execute(busy_query).scalar_one())
        last = self._last_utilization
        if last is not None and (busy, total) == last[1:] and now - last[0] < UTILIZATION_EVERY_S:
            return
        with self._writer.begin() as conn:
            conn.execute(
                insert(utilization_samples).values(at=now, busy_gpus=busy, total_gpus=total)
            )
            if now - self._last_purge > 3600:
                self._last_purge = now
                conn.execute(
                    delete(utilization_samples).where(
                        utilization_samples.c.at < now - UTILIZATION_KEEP_S
                    )
                )
        self._last_utilization = (now, busy, total)
