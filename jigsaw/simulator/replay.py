"""The trace replay: the real scheduling cycle on an in-memory store, the simulated executor
and a virtual clock, driven event by event.

Each step of :meth:`Replay.run`: the clock jumps to the next of a job arrival, an executor
event (a gang starts or finishes) or a round boundary; the arrival gate
(:mod:`jigsaw.simulator.arrival_gate`) lets in what has arrived; the executor's events are
observed; and if the round clock (:mod:`jigsaw.simulator.round_clock`) says a round starts
and something can change, one scheduling cycle runs.

Policies that decide in rounds (``policy.periodic``) are asked only at round boundaries, and
only when something changed or some job is waiting; others (FIFO) are asked whenever a job
arrives or a gang finishes. ``admit_in_rounds`` makes
every policy decide at round boundaries only; the peers' round rules (Pollux's fixed grid,
Gavel's rounds that end with their last gang and its allocation resets) are options chosen
by :mod:`jigsaw.simulator.semantics`.

Quiet rounds are skipped: after a round with no decisions, a policy that implements the
``stable_until`` hint (las, jigsaw) says until when nothing can change
without an arrival or a finish, and the clock jumps to the first round boundary after that.
The decisions are the same as asking every round (``skip_quiet_rounds=False``); only the
replay gets faster.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from jigsaw.model.cluster import Cluster
from jigsaw.model.decisions import Decision, Preempt, Start
from jigsaw.model.domain import Job, replace_job, submitted_event
from jigsaw.model.executor_events import Finished, Started
from jigsaw.model.numerics import TIME_EPS_S
from jigsaw.policies.base import Policy
from jigsaw.scheduling.clock import VirtualClock
from jigsaw.scheduling.cycle import CycleReport, SchedulingCycle
from jigsaw.scheduling.memstore import InMemoryStore
from jigsaw.simulator.allocation_resets import AllocationResets, FollowsAllocationResets
from jigsaw.simulator.arrival_gate import ArrivalGate
from jigsaw.simulator.decisionlog import DecisionLog
from jigsaw.simulator.metrics import BusyTimeline
from jigsaw.simulator.rates import OverheadModel, ReferenceRate
from jigsaw.simulator.replay_executor import ReplayExecutor
from jigsaw.simulator.replay_result import ReplayResult, replay_result
from jigsaw.simulator.round_clock import RoundClock
from jigsaw.simulator.workload import Arrival

ProgressHook = Callable[[int, int, float], None]
"""(jobs finished, jobs in total, virtual time) after each step."""

QUIET_MARGIN_S = 1e-3
"""A quiet spell ends this long before the moment ``stable_until`` names, so that float
round-off never pushes the jump past a real crossing."""


@dataclass(slots=True)
class _LoopState:
    """What the replay loop carries from one step to the next."""

    dirty: bool = False
    """Something changed that the policy has not decided on yet."""
    quiet_until: float = -math.inf
    """No round before this can decide anything (reset by any arrival or event)."""
    rounds: int = 0
    cycles: int = 0
    idle_rounds: int = 0
    """Consecutive cycles with waiting jobs, nothing running and no decision."""
    stalled: bool = False


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
        resets = (
            None
            if self.options.allocation_reset_s is None
            else AllocationResets(self.options.allocation_reset_s)
        )
        self._gate = ArrivalGate(self.arrivals, resets, self._arrive)
        self._in_rounds = policy.periodic or self.options.admit_in_rounds
        self._skip_quiet = self.options.skip_quiet_rounds and not self.options.rounds_end_when_idle
        self._resizing = policy.resizes_running_jobs
        """Such a policy wants every round while a gang runs (as if a job were waiting)."""
        self._sizes_elastic = policy.sizes_elastic_jobs
        """Such a policy may grow an elastic job once it is up: a round follows its start."""
        self._round_clock = RoundClock.starting_at(
            self.clock.now(),
            self.options.round_s,
            ends_when_idle=self.options.rounds_end_when_idle,
            grid_only=self.options.rounds_on_grid_only,
        )

    # -- the loop -----------------------------------------------------------------------------
    def run(self, progress: ProgressHook | None = None) -> ReplayResult:
        """Step the virtual clock until every job is done or the rest can never start. Each
        step: jump to the next moment, let arrivals in, observe the executor, and, when a
        round starts (or, for a policy outside rounds, something changed), run one cycle."""
        started = time.perf_counter()
        loop = _LoopState()
        while True:
            waiting = self._jobs_waiting()
            now = self._next_moment(loop, waiting)
            if now is None:
                # Jobs wait, the policy says no round will ever start them: stalled.
                loop.stalled = self._in_rounds and waiting
                break
            self.clock.advance_to(now)
            if self._in_rounds and waiting and loop.quiet_until > -math.inf:
                self._round_clock.skip_to(now)
            self._admit_arrivals(now, waiting, loop)
            self._observe_executor(now, loop)
            if not self._decides_now(now, waiting, loop):
                continue
            report = self._run_cycle(now, loop)
            if self._stalled_after(report, loop):
                loop.stalled = True
                break
            if progress is not None:
                progress(self._finished, len(self.arrivals), now)
        return replay_result(
            self.policy.name,
            self.store,
            self.log,
            self.timeline,
            self.rates,
            self.cluster.num_gpus,
            rounds=loop.rounds,
            cycles=loop.cycles,
            wall=time.perf_counter() - started,
            stalled=loop.stalled,
            too_large=self.too_large,
        )

    def _jobs_waiting(self) -> bool:
        """Some job wants a decision: queued, admitted but not running, held for a reset, or
        running under a policy that resizes running jobs every round."""
        return (
            bool(self._backlog)
            or self.store.active_count() > self.executor.gang_count()
            or self._gate.holding
            or (self._resizing and self.executor.gang_count() > 0)
        )

    def _next_moment(self, loop: _LoopState, waiting: bool) -> float | None:
        """The next of: an arrival, an executor event, the round that is due (``None``:
        nothing will ever happen again)."""
        upcoming: list[float] = []
        arrival_at = self._gate.next_at()
        if arrival_at is not None:
            upcoming.append(arrival_at)
        executor_at = self.executor.next_event_time()
        if executor_at is not None:
            upcoming.append(executor_at)
        if self._in_rounds and (loop.dirty or (waiting and loop.quiet_until == -math.inf)):
            upcoming.append(self._round_clock.next_round)
        elif self._in_rounds and waiting and loop.quiet_until < math.inf:
            upcoming.append(self._round_clock.after_quiet(loop.quiet_until))
        elif not self._in_rounds and loop.dirty:
            upcoming.append(self.clock.now())
        if not upcoming:
            return None
        return max(min(upcoming), self.clock.now())

    def _admit_arrivals(self, now: float, waiting: bool, loop: _LoopState) -> None:
        arrived, changes = self._gate.admit_until(
            now, newcomers_blocked=self._prefix_only and waiting
        )
        if arrived:
            loop.quiet_until = -math.inf
        if changes:
            loop.dirty = True

    def _observe_executor(self, now: float, loop: _LoopState) -> None:
        """Fold the executor's events into the store. A start asks for no decision, unless
        the policy may grow the elastic job that started."""
        events = self.executor.poll(now)
        self.cycle.observe(events)
        if events:
            loop.quiet_until = -math.inf
        if any(
            not isinstance(event, Started)
            or (self._sizes_elastic and self.store.get(event.job_id).spec.is_elastic)
            for event in events
        ):
            loop.dirty = True
            finished = sum(isinstance(event, Finished) for event in events)
            self._finished += finished
            if finished:
                self._gate.note_finishes()

    def _decides_now(self, now: float, waiting: bool, loop: _LoopState) -> bool:
        """Whether a cycle runs at ``now``: a round starts and something can change, or, for
        a policy outside rounds, something changed."""
        if not self._in_rounds:
            return loop.dirty
        if not self._round_clock.reached(now, lambda: self.executor.gang_count() == 0):
            return False
        if not (loop.dirty or waiting) or (not loop.dirty and now + TIME_EPS_S < loop.quiet_until):
            return False
        if self._gate.resets_allocations:
            all_arrived_idle = self.executor.gang_count() == 0 and self._gate.all_arrived
            if all_arrived_idle and isinstance(self.policy, FollowsAllocationResets):
                self.policy.restart_reset_clock()
            if not self._gate.opens_round(
                now,
                idle_and_all_arrived=all_arrived_idle,
                decides_between_resets=self.policy.periodic,
            ):
                return False
        loop.rounds += 1
        return True

    def _run_cycle(self, now: float, loop: _LoopState) -> CycleReport:
        self._feed()
        if self.executor.reports_noise:
            # As the service does with real workers' lease reports (curve eta only).
            self.cycle.observe(self.executor.noise_reports(now))
        report = self.cycle.run_once()
        loop.cycles += 1
        loop.dirty = False
        loop.quiet_until = -math.inf
        if self._skip_quiet and not report.decisions and report.snapshot is not None:
            stable = self.policy.stable_until(report.snapshot)
            if stable is not None:
                loop.quiet_until = stable - QUIET_MARGIN_S
        return report

    def _stalled_after(self, report: CycleReport, loop: _LoopState) -> bool:
        """Jobs wait, nothing runs and the policy decided nothing, for more rounds than
        ``max_idle_rounds`` (or once, outside rounds): such jobs can never start."""
        idle = not report.decisions and self.executor.gang_count() == 0 and self._gate.all_arrived
        waiting = idle and (self.store.active_count() > 0 or bool(self._backlog))
        loop.idle_rounds = loop.idle_rounds + 1 if waiting else 0
        return loop.idle_rounds > self.options.max_idle_rounds or (waiting and not self._in_rounds)

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
                # Carrying the next version, the record is stored as it is (one copy).
                resumed = replace_job(job, iterations_done=done, version=job.version + 1)
                self.store.save(resumed, expected_version=job.version)
