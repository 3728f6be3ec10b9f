"""One scheduling cycle, read top to bottom:

1. observe   - fold what the executor reports (started, progressed, finished, failed) into
               the store;
2. reconcile - stop gangs the store no longer wants (cancelled), and mark jobs whose gang the
               executor lost (restart, dead node) for retry;
3. snapshot  - take a read-only picture of waiting and running jobs and GPU occupancy;
4. decide    - ask the policy, which returns decisions and changes nothing; a job with which
               the policy always raises is failed (``jigsaw.scheduling.poison``), not the whole
               round;
5. apply     - record each decision as a transition in the store, then tell the executor;
6. end round - a policy that carries state between rounds (Gavel's allocation) keeps what
               the round left it (``KeepsRoundState.end_round``): deciding itself wrote nothing.

The same cycle runs the service (SQL store, Ray executor, wall clock) and the simulator
(in-memory store, simulated executor, virtual clock).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from jigsaw.model.cluster import Cluster
from jigsaw.model.decisions import Decision, Preempt, Replan, Resize, Start
from jigsaw.model.domain import Job, replace_job, transition
from jigsaw.model.errors import ConflictError, IllegalTransitionError, JobNotFoundError
from jigsaw.model.executor_events import (
    ExecutorEvent,
    Failed,
    Finished,
    Progressed,
    ResizeReverted,
    Started,
)
from jigsaw.model.lifecycle import JobState
from jigsaw.model.reasons import ReasonCode
from jigsaw.model.snapshot import Snapshot
from jigsaw.policies.base import KeepsRoundState, Policy
from jigsaw.scheduling.lease_facts import lease_facts, measured_resize
from jigsaw.scheduling.poison import find_poison, without
from jigsaw.scheduling.seams import Clock, Executor, ReplanRefused, Store

log = logging.getLogger(__name__)
_RUNNING, _ADMITTED = JobState.RUNNING, JobState.ADMITTED
"""Bound once: these are tested against every active job in every round."""

MAX_POISON_PER_ROUND = 3
"""Jobs a round may fail for making the policy raise; past that the round itself fails."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Restart a failed gang from its checkpoint with exponential back-off, up to a limit.

    With ``window_s`` set, only failures within the last ``window_s`` seconds count against
    ``max_failures`` (a crash loop is N failures in T); without it, every failure counts.
    """

    max_failures: int = 3
    base_backoff_s: float = 5.0
    max_backoff_s: float = 300.0
    window_s: float | None = None

    def backoff(self, failures: int) -> float:
        return float(min(self.base_backoff_s * 2 ** max(failures - 1, 0), self.max_backoff_s))

    def counted_failures(self, failures: int, history: Sequence[float], at: float) -> int:
        if self.window_s is None:
            return failures
        return sum(1 for moment in history if moment > at - self.window_s)


@dataclass(frozen=True, slots=True)
class CycleReport:
    at: float
    decisions: tuple[Decision, ...]
    applied: int
    skipped: int
    latency_s: float
    snapshot: Snapshot | None = None
    """What the policy decided from (the simulator asks policies how long it stays valid)."""


@dataclass
class SchedulingCycle:
    store: Store
    executor: Executor
    policy: Policy
    clock: Clock
    cluster: Callable[[], Cluster]
    actor: str = "scheduler"
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    on_decision: Callable[[float, Decision], None] | None = None
    on_event: Callable[[ExecutorEvent], None] | None = None
    """Sees every executor report before it is folded in (the service stores metrics)."""
    _round_state_checked: Policy | None = field(default=None, init=False, repr=False)
    _round_state_kept: bool = field(default=False, init=False, repr=False)

    def run_once(self) -> CycleReport:
        started = time.perf_counter()
        now = self.clock.now()
        self.observe(self.executor.poll(now))
        cluster = self.cluster()
        snapshot = self._snapshot(now, cluster)
        if self._reconcile(snapshot.running, cluster, now):
            snapshot = self._snapshot(now, cluster)
        snapshot, decisions = self._decide(snapshot, now)
        applied = sum(self._apply(decision, now) for decision in decisions)
        if self._keeps_round_state():
            self.policy.end_round(snapshot)  # type: ignore[attr-defined]
        return CycleReport(
            now,
            tuple(decisions),
            applied,
            len(decisions) - applied,
            time.perf_counter() - started,
            snapshot,
        )

    def _snapshot(self, now: float, cluster: Cluster) -> Snapshot:
        sides = self.store.active_sides()
        return Snapshot.from_sides(now, cluster, sides.holding, sides.waiting, sides.backing_off)

    def _keeps_round_state(self) -> bool:
        """``isinstance(self.policy, KeepsRoundState)``, asked once per policy object: a
        runtime protocol check walks the protocol's attributes on every call."""
        policy = self.policy
        if self._round_state_checked is not policy:
            self._round_state_kept = isinstance(policy, KeepsRoundState)
            self._round_state_checked = policy
        return self._round_state_kept

    # -- 4. decide (with poison-job isolation) -----------------------------------------------
    def _decide(self, snapshot: Snapshot, now: float) -> tuple[Snapshot, list[Decision]]:
        for _ in range(MAX_POISON_PER_ROUND):
            try:
                return snapshot, self.policy.decide(snapshot)
            except Exception as error:
                culprit = find_poison(self.policy, snapshot)
                if culprit is None:
                    raise
                self._fail_poison(culprit, error, now)
                snapshot = without(snapshot, culprit.id)
        return snapshot, self.policy.decide(snapshot)

    def _fail_poison(self, job: Job, error: Exception, now: float) -> None:
        name = self.policy.name
        reason = (
            f"the {name} policy raises whenever it decides with this job "
            f"({type(error).__name__}: {error}); failed so the rest of the queue keeps moving"
        )
        log.error("job %s: %s", job.id, reason)
        self._move(job, JobState.FAILED, reason, now, code=ReasonCode.POISON)
        if job.state.holds_resources:
            self.executor.stop(job.id, checkpoint=False)

    # -- 1. observe ---------------------------------------------------------------------
    def observe(self, events: Sequence[ExecutorEvent]) -> None:
        for event in events:
            try:
                self._observe_one(event)
            except (ConflictError, IllegalTransitionError, JobNotFoundError) as exc:
                # A late report about a job that moved on (cancelled, preempted): harmless.
                log.info("ignored stale executor report %s: %s", event, exc)

    def _observe_one(self, event: ExecutorEvent) -> None:
        job = self.store.get(event.job_id)
        if event.attempt is not None and event.attempt != job.attempt:
            log.info(
                "ignored report of attempt %s for %s (now %s)", event.attempt, job.id, job.attempt
            )
            return
        if self.on_event is not None:
            self.on_event(event)
        match event:
            case Started(at=at):
                if job.state is _ADMITTED:
                    self._move(job, JobState.RUNNING, "all workers up", at, actor="executor")
                elif job.state is _RUNNING and (took := measured_resize(job, at)) is not None:
                    self.store.save(replace_job(job, resize_s=took), expected_version=job.version)
            case Progressed(iterations_done=done, outcome=outcome):
                if job.state is _RUNNING and done > job.iterations_done:
                    progressed = lease_facts(job, outcome).applied_to(job)
                    self.store.save(
                        replace_job(progressed, iterations_done=done), expected_version=job.version
                    )
            case Finished(at=at, iterations_done=done):
                self._move(
                    job,
                    JobState.SUCCEEDED,
                    "reached its iteration target",
                    at,
                    actor="executor",
                    iterations_done=done,
                )
            case Failed(at=at, reason=reason, retryable=retryable):
                self._fail(job, reason, at, retryable=retryable, charge=True)
            case ResizeReverted(at=at, placement=placement, plan=plan, worker_batch=batch):
                if job.state is _RUNNING:
                    self._move(
                        job,
                        JobState.RUNNING,
                        event.reason,
                        at,
                        actor="executor",
                        code=ReasonCode.RESIZE_REVERTED,
                        placement=placement,
                        plan=plan,
                        worker_batch=batch,
                    )

    def _fail(self, job: Job, reason: str, at: float, *, retryable: bool, charge: bool) -> None:
        failures = job.failures + 1 if charge else job.failures
        history = [*job.failure_times, at] if charge else list(job.failure_times)
        counted = self.retry.counted_failures(failures, history, at)
        if not retryable or counted > self.retry.max_failures:
            within = f" in {self.retry.window_s:g}s" if self.retry.window_s is not None else ""
            why = reason if not retryable else f"{reason}; gave up after {counted} failures{within}"
            code = ReasonCode.CRASH_LOOP if retryable else ReasonCode.FAILED
            # The last failure counts too, so the job's count and "gave up after" agree.
            self._move(
                job, JobState.FAILED, why, at, actor="executor", code=code, failures=failures
            )
            return
        retry_after = at + self.retry.backoff(failures)
        if job.state != JobState.RUNNING:
            # ADMITTED jobs that lost their gang before starting wait again; a charged failure
            # (the launch itself failed) counts and backs off, or a failing launch would loop.
            charged = (
                {
                    "failures": failures,
                    "retry_after": retry_after,
                    "failure_times": tuple(history[-(self.retry.max_failures + 1) :]),
                }
                if charge
                else {}
            )
            self._move(
                job,
                JobState.PREEMPTED,
                f"{reason}; will be re-admitted",
                at,
                actor="executor",
                code=ReasonCode.REQUEUED_AFTER_FAILURE,
                preemptions=job.preemptions,
                **charged,
            )
            return
        self._move(
            job,
            JobState.RETRYING,
            f"{reason}; retry {failures} after back-off",
            at,
            actor="executor",
            failures=failures,
            retry_after=retry_after,
            failure_times=tuple(history[-(self.retry.max_failures + 1) :]),
        )

    # -- 2. reconcile -------------------------------------------------------------------
    def _reconcile(self, holding: Sequence[Job], cluster: Cluster, now: float) -> bool:
        """Whether it changed the store. ``holding``: the jobs that hold GPUs (ADMITTED or
        RUNNING; the snapshot lists them)."""
        wanted = {job.id for job in holding}
        running_in_executor = self.executor.running_jobs()
        if running_in_executor == wanted and cluster.every_node_alive:
            return False  # the usual round: every gang the store wants runs, every node lives
        alive = {node.index for node in cluster.alive_nodes}
        for job_id in sorted(running_in_executor - wanted):
            self.executor.stop(job_id, checkpoint=False)
        running_in_executor = self.executor.running_jobs()
        changed = False
        for job in holding:
            lost_gang = job.id not in running_in_executor
            lost_node = (
                not lost_gang
                and len(alive) < len(cluster.nodes)
                and any(gpu[0] not in alive for gpu in job.placement)
            )
            if not (lost_gang or lost_node):
                continue
            changed = True
            if lost_node:
                self.executor.stop(job.id, checkpoint=False)
            try:
                if lost_gang:
                    self._fail(
                        job,
                        "executor lost the gang (control-plane restart)",
                        now,
                        retryable=True,
                        charge=False,
                    )
                else:
                    self._fail(
                        job, "a node of its placement was lost", now, retryable=True, charge=True
                    )
            except (ConflictError, IllegalTransitionError) as exc:
                # The job moved meanwhile (a user cancel landed mid-round): nothing to retry.
                log.info("reconcile skipped %s: %s", job.id, exc)
        return changed

    # -- 5. apply -----------------------------------------------------------------------
    def _apply(self, decision: Decision, now: float) -> bool:
        try:
            self._apply_one(decision, now)
        except (ConflictError, IllegalTransitionError, JobNotFoundError) as exc:
            log.info("skipped decision %s: %s", decision, exc)
            return False
        except ReplanRefused as refused:
            what = "resize" if isinstance(decision, Resize) else "re-plan"
            log.warning("%s of %s refused, nothing recorded: %s", what, decision.job_id, refused)
            return False
        if self.on_decision is not None:
            self.on_decision(now, decision)
        return True

    def _apply_one(self, decision: Decision, now: float) -> None:
        job = self.store.get(decision.job_id)
        match decision:
            case Start(placement=placement, plan=plan, reason=reason, worker_batch=batch):
                admitted = self._move(
                    job,
                    JobState.ADMITTED,
                    reason,
                    now,
                    placement=placement,
                    plan=plan,
                    attempt=job.attempt + 1,
                    worker_batch=batch,
                )
                self.executor.start(admitted, placement, plan)
            case Preempt(reason=reason, by=by):
                why = f"{reason} (preempted by {by})" if by else reason
                if by:
                    self._move(
                        job,
                        JobState.PREEMPTED,
                        why,
                        now,
                        code=ReasonCode.PREEMPTED_BY,
                        preempted_by=by,
                    )
                else:
                    self._move(job, JobState.PREEMPTED, why, now)
                self.executor.stop(job.id, checkpoint=True)
            case Replan(placement=placement, plan=plan, reason=reason):
                if not job.state.holds_resources:
                    raise IllegalTransitionError(f"job {job.id} is {job.state}, cannot re-plan")
                # Executor first: a re-plan it refuses (ReplanRefused) is not recorded. Only a
                # cancel writes a running job meanwhile, and the next round stops that gang.
                self.executor.replan(job.id, placement, plan)
                self.store.save(
                    replace_job(
                        job, plan=plan, placement=placement, reason=reason, plan_changed_at=now
                    ),
                    expected_version=job.version,
                )
            case Resize(placement=placement, plan=plan, worker_batch=batch, reason=reason):
                if job.state is not _RUNNING:
                    raise IllegalTransitionError(f"job {job.id} is {job.state}, cannot resize")
                # Executor first, as above. RUNNING -> RUNNING restarts the run interval, so
                # the GPU-seconds attained so far count at the old size.
                self.executor.resize(job.id, placement, plan, batch)
                self._move(
                    job,
                    JobState.RUNNING,
                    reason,
                    now,
                    code=ReasonCode.RESIZED,
                    placement=placement,
                    plan=plan,
                    worker_batch=batch,
                    resized_at=now,
                    resize_s=None,
                    resizes=job.resizes + 1,
                )

    def _move(
        self,
        job: Job,
        target: JobState,
        reason: str,
        at: float,
        *,
        actor: str | None = None,
        code: ReasonCode | None = None,
        **changes: Any,
    ) -> Job:
        # The version the store gives the record: the in-memory store keeps it uncopied.
        changes["version"] = job.version + 1
        moved, event = transition(
            job, target, reason=reason, at=at, actor=actor or self.actor, code=code, **changes
        )
        return self.store.save(moved, expected_version=job.version, event=event)
