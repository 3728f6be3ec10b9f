"""The trace replay: the real scheduling cycle on an in-memory store, the simulated executor
and a virtual clock, driven event by event.

The clock jumps to the next of: a job arrival, an executor event (a gang starts or
finishes), or a round boundary. Policies that decide in rounds (``policy.periodic``) are
asked only at round boundaries, and only when something changed or some job is waiting;
others (FIFO) are asked whenever a job arrives or a gang finishes. ``admit_in_rounds`` makes
every policy decide at round boundaries only; the peers' round rules (Pollux's fixed grid,
Gavel's rounds that end with their last gang and its allocation resets) are options chosen
by :mod:`jigsaw.simulator.semantics`.

Quiet rounds are skipped: after a round with no decisions, a policy that implements
a policy's `stable_until` hint (las, jigsaw) says until when nothing can change
without an arrival or a finish, and the clock jumps to the first round boundary after that.
The decisions are the same as asking every round (``skip_quiet_rounds=False``); only the
replay gets faster.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from jigsaw.model.cluster import Cluster
from jigsaw.model.decisions import Decision, Preempt, Start
from jigsaw.model.domain import Job, submitted_event
from jigsaw.model.executor_events import Finished, Started
from jigsaw.model.lifecycle import JobState
from jigsaw.policies.base import Policy
from jigsaw.scheduling.clock import VirtualClock
from jigsaw.scheduling.cycle import SchedulingCycle
from jigsaw.scheduling.memstore import InMemoryStore
from jigsaw.simulator.allocation_resets import AllocationResets, FollowsAllocationResets
from jigsaw.simulator.decisionlog import DecisionLog
from jigsaw.simulator.metrics import BusyTimeline, percentile, wanted_gpu_seconds
from jigsaw.simulator.rates import OverheadModel, ReferenceRate
from jigsaw.simulator.replay_executor import ReplayExecutor
from jigsaw.simulator.workload import Arrival

ProgressHook = Callable[[int, int, float], None]
"""(jobs finished, jobs in total, virtual time) after each step."""


@dataclass(frozen=True, slots=True)
class ReplayOptions:
    round_s: float = 60.0
    overheads: OverheadModel = field(default_factory=OverheadModel)
    admit_in_rounds: bool = False
    keep_log: bool = False
    skip_quiet_rounds: bool = True
    """Jump over rounds a policy's `stable_until` says cannot decide anything new."""
    max_idle_rounds: int = 3
    """Stop (``stalled``) after this many rounds with waiting jobs, nothing running and no
    decision: such jobs can never start (a gang larger than the cluster, say)."""
    rounds_end_when_idle: bool = False
    """Gavel's rounds: a round ends when the last gang running in it stops, and the next
    round starts then (an idle cluster starts one at the next arrival); rounds are
    ``round_s`` apart only while some gang runs through them. Otherwise rounds sit on the
    fixed grid of multiples of ``round_s``."""
    allocation_reset_s: float | None = None
    """Gavel's allocation resets (:mod:`jigsaw.simulator.allocation_resets`): arrivals become
    visible to the policy only at a reset, and a policy that is not ``periodic`` (fifo)
    decides only then. ``None``: every arrival is visible at once."""
    rounds_on_grid_only: bool = False
    """Pollux's interval: decisions only at multiples of ``round_s`` (from time 0). Without
    it, a round that no job needed is not held, and the next arrival or finish after it is
    decided at once (then the grid resumes)."""

    def __post_init__(self) -> None:
        if not self.round_s > 0:
            raise ValueError("round length must be positive")
        if self.allocation_reset_s is not None and not self.allocation_reset_s >= 0:
            raise ValueError("allocation_reset_s must be >= 0 seconds")


@dataclass(slots=True)
class ReplayResult:
    policy: str
    store: InMemoryStore
    log: DecisionLog
    timeline: BusyTimeline
    num_gpus: int
    rounds: int
    cycles: int
    wall_s: float
    stalled: bool
    useful_gpu_s: float
    first_submit: float
    last_finish: float
    summary: dict[str, Any]


class Replay:
    def __init__(
        self,
        arrivals: Sequence[Arrival],
        policy: Policy,
        rates: ReferenceRate,
        cluster: Cluster,
        options: ReplayOptions | None = None,
    ) -> None:
        fits = [a for a in arrivals if a.spec.workers <= cluster.num_gpus]
        self.too_large = len(arrivals) - len(fits)
        """Jobs whose gang is larger than the cluster: never submitted, reported."""
        self.arrivals = sorted(fits, key=lambda a: a.at)
        self.policy = policy
        self.rates = rates
        self.cluster = cluster
        self.options = options if options is not None else ReplayOptions()
        self.clock = VirtualClock(self.arrivals[0].at if self.arrivals else 0.0)
        self.store = InMemoryStore(keep_events=False)
        self.timeline = BusyTimeline()
        self.executor = ReplayExecutor(
            rates, self.options.overheads, self.clock, on_busy_change=self.timeline.change
        )
        self.log = DecisionLog(keep_lines=self.options.keep_log)
        self.cycle = SchedulingCycle(
            self.store,
            self.executor,
            policy,
            self.clock,
            lambda: self.cluster,
            on_decision=self._on_decision,
        )
        self._finished = 0
        self._prefix_only = policy.serves_arrival_prefix
        self._backlog: deque[Arrival] = deque()
        self._fed = 0
        self._started: set[str] = set()
        self._resets = (
            None
            if self.options.allocation_reset_s is None
            else AllocationResets(self.options.allocation_reset_s)
        )

    # -- the loop -----------------------------------------------------------------------------
    def run(self, progress: ProgressHook | None = None) -> ReplayResult:
        started = time.perf_counter()
        options = self.options
        in_rounds = self.policy.periodic or options.admit_in_rounds
        skip_quiet = options.skip_quiet_rounds and not options.rounds_end_when_idle
        pending = list(reversed(self.arrivals))
        next_round = self.clock.now()
        if options.rounds_on_grid_only:
            next_round = self._round_at_or_after(next_round)
        quiet_until = -math.inf
        """No round before this can decide anything (reset by any arrival or event)."""
        dirty = False
        rounds = cycles = idle_rounds = 0
        stalled = False
        resets = self._resets
        periodic = self.policy.periodic
        resizing = self.policy.resizes_running_jobs
        """Such a policy wants every round while a gang runs (as if a job were waiting)."""
        sizes_elastic = self.policy.sizes_elastic_jobs
        """Such a policy may grow an elastic job once it is up: a round follows its start."""
        while True:
            waiting = (
                bool(self._backlog)
                or (len(self.store.active_jobs()) > len(self.executor.running_jobs()))
                or (resets is not None and bool(resets.held))
                or (resizing and bool(self.executor.running_jobs()))
            )
            upcoming = [pending[-1].at] if pending else []
            executor_at = self.executor.next_event_time()
            if executor_at is not None:
                upcoming.append(executor_at)
            if in_rounds and (dirty or (waiting and quiet_until == -math.inf)):
                upcoming.append(next_round)
            elif in_rounds and waiting and quiet_until < math.inf:
                upcoming.append(max(next_round, self._round_at_or_after(quiet_until)))
            elif not in_rounds and dirty:
                upcoming.append(self.clock.now())
            if not upcoming:
                # Jobs wait, the policy says no round will ever start them: stalled.
                stalled = in_rounds and waiting
                break
            now = max(min(upcoming), self.clock.now())
            self.clock.advance_to(now)
            if in_rounds and waiting and quiet_until > -math.inf:
                # The skipped rounds happened, deciding nothing: the round clock moved on.
                next_round = max(next_round, self._round_at_or_after(now))
            while pending and pending[-1].at <= now:
                # Behind a waiting job, an arrival-order policy cannot start a newcomer.
                dirty = dirty or not (self._prefix_only and waiting)
                quiet_until = -math.inf
                if resets is not None:
                    resets.hold(pending.pop())
                    dirty = True
                else:
                    self._arrive(pending.pop())
            events = self.executor.poll(now)
            self.cycle.observe(events)
            if events:
                quiet_until = -math.inf
            if any(
                not isinstance(event, Started)
                or (sizes_elastic and self.store.get(event.job_id).spec.is_elastic)
                for event in events
            ):
                dirty = True
                self._finished += sum(isinstance(event, Finished) for event in events)
                if resets is not None and any(isinstance(event, Finished) for event in events):
                    resets.changed = True
            if in_rounds:
                if (
                    options.rounds_end_when_idle
                    and now + 1e-9 < next_round
                    and not self.executor.running_jobs()
                ):
                    next_round = now
                elif options.rounds_on_grid_only and next_round < now - 1e-9:
                    next_round = self._round_at_or_after(now)
                if now + 1e-9 < next_round:
                    continue
                if options.rounds_end_when_idle:
                    next_round = now + options.round_s
                else:
                    next_round = (math.floor(now / options.round_s + 1e-9) + 1) * options.round_s
                if not (dirty or waiting) or (not dirty and now + 1e-9 < quiet_until):
                    continue
                if resets is not None:
                    all_arrived_idle = not self.executor.running_jobs() and not pending
                    if all_arrived_idle and isinstance(self.policy, FollowsAllocationResets):
                        self.policy.restart_reset_clock()
                    if resets.due(now, idle_and_all_arrived=all_arrived_idle):
                        for arrival in resets.release():
                            self._arrive(arrival)
                    elif not periodic:
                        continue  # fifo's allocation changes only at a reset
                rounds += 1
            elif not dirty:
                continue
            self._feed()
            if self.executor.reports_noise:
                # As the service does with real workers' lease reports (curve eta only).
                self.cycle.observe(self.executor.noise_reports(now))
            report = self.cycle.run_once()
            cycles += 1
            dirty = False
            quiet_until = -math.inf
            if skip_quiet and not report.decisions and report.snapshot is not None:
                stable = self.policy.stable_until(report.snapshot)
                if stable is not None:
                    # Margin: float round-off must never push the jump past a real crossing.
                    quiet_until = stable - 1e-3
            idle = not report.decisions and not self.executor.running_jobs() and not pending
            waiting = idle and (bool(self.store.active_jobs()) or bool(self._backlog))
            idle_rounds = idle_rounds + 1 if waiting else 0
            if idle_rounds > options.max_idle_rounds or (waiting and not in_rounds):
                stalled = True
                break
            if progress is not None:
                progress(self._finished, len(self.arrivals), now)
        wall = time.perf_counter() - started
        return self._result(rounds, cycles, wall, stalled)

    def _round_at_or_after(self, moment: float) -> float:
        """The first round boundary (a multiple of the round length) at or after ``moment``."""
        round_s = self.options.round_s
        return math.ceil(moment / round_s - 1e-9) * round_s

    # -- arrivals -------------------------------------------------------------------------------
    def _arrive(self, arrival: Arrival) -> None:
        if self._prefix_only:
            self._backlog.append(arrival)
        else:
            self._submit(arrival)

    def _feed(self) -> None:
        """For a policy that serves an arrival-order prefix (FIFO), keep just enough of the
        queue in the store: free GPUs + 1 waiting jobs. Decisions are the same as with the
        whole queue there, and a cycle costs O(running + free GPUs), not O(queue)."""
        if not self._backlog:
            return
        want = self.cluster.num_gpus - self.executor.busy_gpus + 1
        while self._backlog and self._fed - len(self._started) < want:
            self._submit(self._backlog.popleft())

    def _submit(self, arrival: Arrival) -> None:
        job = Job(id=arrival.job_id, spec=arrival.spec, submitted_at=arrival.at)
        self.store.add(job, submitted_event(job, "trace"))
        self._fed += 1

    # -- hooks ----------------------------------------------------------------------------------

    def _on_decision(self, at: float, decision: Decision) -> None:
        self.log.record(at, decision)
        if isinstance(decision, Start):
            self._started.add(decision.job_id)
        if isinstance(decision, Preempt):
            # The executor checkpointed exactly where the gang stopped; resume from there.
            done = self.executor.checkpoints.pop(decision.job_id, None)
            if done is not None:
                job = self.store.get(decision.job_id)
                self.store.save(replace(job, iterations_done=done), expected_version=job.version)

    # -- results --------------------------------------------------------------------------------
    def _result(self, rounds: int, cycles: int, wall: float, stalled: bool) -> ReplayResult:
        jobs = self.store.all_jobs()
        first = min((j.submitted_at for j in jobs), default=0.0)
        done = [j for j in jobs if j.state == JobState.SUCCEEDED and j.finished_at is not None]
        last = max((j.finished_at or first for j in done), default=first)
        jcts = [(j.finished_at or 0.0) - j.submitted_at for j in done]
        useful = math.fsum(
            min(j.iterations_done, j.spec.iterations)
            / self.rates.reference_rate(j)
            * j.spec.workers
            for j in jobs
            if j.iterations_done > 0
        )
        num_gpus = self.cluster.num_gpus
        makespan = last - first
        busy = self.timeline.area_until(last)
        wanted = wanted_gpu_seconds(
            [
                (
                    j.submitted_at,
                    j.finished_at if j.finished_at is not None else last,
                    min(j.spec.workers, num_gpus),
                )
                for j in jobs
            ],
            num_gpus,
        )
        summary: dict[str, Any] = {
            "policy": self.policy.name,
            "jobs": len(jobs),
            "completed": len(done),
            "avg_jct_s": math.fsum(jcts) / len(jcts) if jcts else math.nan,
            "p50_jct_s": percentile(jcts, 50),
            "p99_jct_s": percentile(jcts, 99),
            "makespan_s": makespan,
            "utilization": busy / (num_gpus * makespan) if makespan > 0 else math.nan,
            "cluster_efficiency": useful / wanted if wanted > 0 else math.nan,
            "busy_efficiency": useful / busy if busy > 0 else math.nan,
            "preemptions": sum(j.preemptions for j in jobs),
            "replans": self.log.counts["replan"],
            "resizes": self.log.counts["resize"],
            "packed_starts": self.log.packed_starts,
            "starts": self.log.counts["start"],
            "rounds": rounds,
            "cycles": cycles,
            "stalled": stalled,
            "skipped_too_large": self.too_large,
            "decision_log_sha256": self.log.sha256,
            "wall_s": wall,
        }
        return ReplayResult(
            summary["policy"],
            self.store,
            self.log,
            self.timeline,
            num_gpus,
            rounds,
            cycles,
            wall,
            stalled,
            useful,
            first,
            last,
            summary,
        )
