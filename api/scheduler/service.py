"""The scheduler loop in the service: lead, then run one scheduling round every
``ROUND_SECONDS`` until stopped or no longer leader.

The rounds are the core's :class:`~jigsaw.scheduling.cycle.SchedulingCycle` over the SQL store
(fenced
with this leader's epoch), the selected executor and the wall clock. A standby (Postgres only)
polls for leadership. Losing leadership drops the executor's gangs and returns to standby.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from api.goodput_source import LeaseGoodputSource, StepTimeRecorder
from api.idempotency import IdempotencyKeys
from api.metrics import Metrics
from api.oracle_view import OracleView, oracle_view_for
from api.scheduler.leader import Leadership, SchedulerAlreadyRunningError, leadership_for
from api.scheduler.recorder import LeadershipLostError, ProgressRecorder, RoundRecorder
from api.settings import Settings
from api.store import SqlStore, StaleEpochError
from api.store.telemetry import Telemetry
from jigsaw.goodput.source import GoodputSource
from jigsaw.model.cluster import Cluster
from jigsaw.model.executor_events import ExecutorEvent
from jigsaw.oracle import Oracle
from jigsaw.policies.base import Policy
from jigsaw.policies.builder import build_policy as build_named_policy
from jigsaw.policies.quota import Quotas
from jigsaw.scheduling.clock import WallClock
from jigsaw.scheduling.cycle import CycleReport, RetryPolicy, SchedulingCycle
from jigsaw.scheduling.retention import sweep_checkpoints
from jigsaw.scheduling.seams import Executor, KeepsCheckpoints
from jigsaw.simulator.rate_executor import RateDrivenExecutor
from jigsaw.simulator.service_rates import ColocatedConstantRate

log = logging.getLogger(__name__)

STANDBY_POLL_S = 2.0
PURGE_EVERY_S = 3600.0


@dataclass
class ExecutorHandle:
    executor: Executor
    cluster: Callable[[], Cluster]

    def shutdown(self) -> None:
        stop = getattr(self.executor, "shutdown", None)
        if callable(stop):
            stop()


def build_executor(settings: Settings, oracle: Oracle | None = None) -> ExecutorHandle:
    """Ray, or the simulated executor: the configured rate alone, shared GPUs re-timed by
    ``oracle``'s co-location model (the policy's; built from the settings when not given)."""
    if settings.executor == "ray":
        # Lazy: the API and the simulated mode work without Ray installed.
        from worker.ray_executor import create_executor

        ray = create_executor()
        return ExecutorHandle(ray, ray.cluster)
    if oracle is None:
        oracle = oracle_view_for(settings).oracle
    rates = ColocatedConstantRate(
        oracle, settings.sim_iterations_per_second, settings.sim_startup_seconds
    )
    cluster = Cluster.uniform(settings.gpus, settings.gpus_per_node, gpu_type=settings.gpu_type)
    return ExecutorHandle(RateDrivenExecutor(rates, report_progress=True), lambda: cluster)


def build_policy(
    settings: Settings, oracle: OracleView, goodput: GoodputSource | None = None
) -> Policy:
    """The configured policy, built as the simulator builds it
    (:func:`jigsaw.policies.builder.build_policy`), with the service's planner (the one its
    submission checks ask), quotas, and ``goodput``, what jobs have measured in their lease
    reports (:mod:`api.goodput_source`), for a policy that uses it."""
    return build_named_policy(
        settings.policy,
        oracle.oracle,
        dict(settings.policy_options),
        planner=oracle.planner,
        quotas=Quotas(settings.queue_quotas, settings.user_quotas),
        goodput=goodput,
    )


def both(*hooks: Callable[[ExecutorEvent], None]) -> Callable[[ExecutorEvent], None]:
    """One ``on_event`` hook calling each of ``hooks`` in turn."""

    def call(event: ExecutorEvent) -> None:
        for hook in hooks:
            hook(event)

    return call


class SchedulerService:
    def __init__(
        self,
        settings: Settings,
        engine: Engine,
        metrics: Metrics,
        oracle: OracleView,
        *,
        executor_factory: Callable[[Settings], ExecutorHandle] | None = None,
        leadership: Leadership | None = None,
    ) -> None:
        self.settings = settings
        self.engine = engine
        self.metrics = metrics
        self._oracle = oracle
        self._executor_factory = (
            executor_factory
            if executor_factory is not None
            else lambda chosen: build_executor(chosen, oracle.oracle)
        )
        self.leadership = leadership if leadership is not None else leadership_for(engine)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.rounds = 0
        self.epoch: int | None = None
        self.error: str | None = None

    # -- lifecycle ----------------------------------------------------------------------
    def start_in_thread(self) -> threading.Thread:
        self._thread = threading.Thread(target=self._run_guarded, name="scheduler", daemon=True)
        self._thread.start()
        return self._thread

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run_guarded(self) -> None:
        try:
            self.run()
        except SchedulerAlreadyRunningError as error:
            self.error = str(error)
            log.warning("embedded scheduler not started: %s", error)

    def run(self) -> None:
        """Lead and schedule until :meth:`stop`. Raises SchedulerAlreadyRunningError on a
        SQLite database another scheduler process holds."""
        try:
            while not self._stop.is_set():
                try:
                    epoch = self.leadership.try_acquire()
                except SQLAlchemyError as error:
                    log.warning("cannot reach the database to elect a leader: %s", error)
                    self._stop.wait(STANDBY_POLL_S)
                    continue
                if epoch is None:
                    self._stop.wait(STANDBY_POLL_S)
                    continue
                self.epoch = epoch
                try:
                    self._lead(epoch)
                except Exception:  # the loop outlives any one leadership term
                    log.exception("scheduler term of epoch %s ended by an error", epoch)
                    self._stop.wait(STANDBY_POLL_S)
                finally:
                    self.epoch = None
                    self.leadership.release()
        finally:
            self.leadership.release()

    def _sweep_checkpoints(self, executor: Executor, store: SqlStore) -> None:
        if not isinstance(executor, KeepsCheckpoints):
            return
        try:
            report = sweep_checkpoints(executor, store)
        except OSError as error:
            log.warning("checkpoint sweep failed, retrying at the next one: %s", error)
            return
        if report.unknown:
            log.warning(
                "checkpoint directories of %d job(s) the store does not know were left alone: %s",
                len(report.unknown),
                ", ".join(report.unknown[:5]),
            )

    # -- one leadership term --------------------------------------------------------------
    def open_term(self, epoch: int) -> LeaderTerm:
        """The executor, the store fenced with ``epoch``, the cycle and its recorders."""
        handle = self._executor_factory(self.settings)
        store = SqlStore(self.engine, epoch=epoch)
        recorder = RoundRecorder(self.engine, self.metrics, epoch, self.settings.policy)
        telemetry = Telemetry(self.engine, cap_per_job=self.settings.progress_samples_per_job)
        cycle = SchedulingCycle(
            store,
            handle.executor,
            build_policy(self.settings, self._oracle, LeaseGoodputSource(self.engine)),
            WallClock(),
            handle.cluster,
            actor=f"scheduler@{epoch}",
            retry=RetryPolicy(
                max_failures=self.settings.max_failures,
                base_backoff_s=self.settings.retry_backoff_s,
            ),
            on_decision=lambda now, decision: recorder.on_decision(store, now, decision),
            on_event=both(
                ProgressRecorder(store, telemetry, self.settings.lease_iterations),
                StepTimeRecorder(store, self.engine),
            ),
        )
        return LeaderTerm(handle, store, cycle, recorder)

    def _lead(self, epoch: int) -> None:
        term = self.open_term(epoch)
        keys = IdempotencyKeys(self.engine, ttl_s=self.settings.idempotency_ttl_s)
        last_purge = last_sweep = 0.0
        try:
            while not self._stop.is_set():
                tick = time.monotonic()
                if not self.leadership.still_leader():
                    log.warning("scheduler epoch %s lost leadership; standing by", epoch)
                    return
                try:
                    term.run_round()
                    self.rounds += 1
                    if time.time() - last_purge > PURGE_EVERY_S:
                        keys.purge()
                        last_purge = time.time()
                    if time.time() - last_sweep > self.settings.checkpoint_sweep_s:
                        self._sweep_checkpoints(term.handle.executor, term.store)
                        last_sweep = time.time()
                except (LeadershipLostError, StaleEpochError) as error:
                    log.warning("%s; standing by", error)
                    return
                except Exception:
                    log.exception("scheduling round failed; retrying next round")
                elapsed = time.monotonic() - tick
                self._stop.wait(max(self.settings.round_seconds - elapsed, 0.0))
        finally:
            term.handle.shutdown()
            self.epoch = None


@dataclass
class LeaderTerm:
    """What one leadership term schedules with."""

    handle: ExecutorHandle
    store: SqlStore
    cycle: SchedulingCycle
    recorder: RoundRecorder

    def run_round(self) -> CycleReport:
        """One scheduling round, then its record: heartbeat, round state, last decisions,
        cluster and utilisation (raises LeadershipLostError when another epoch leads)."""
        report = self.cycle.run_once()
        self.recorder.after_round(report, self.handle.cluster())
        return report
