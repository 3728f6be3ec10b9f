"""JigSaw: one configuration for every job each round, chosen jointly by one goodput model.

A round, read top to bottom (docs/SCHEDULER.md, "jigsaw" has the why):

1. **Knowledge.** What each job can do at every size it may take: elastic jobs from the
   goodput source (their agents' reports, as pollux sizes them); every other job keeps the
   size it asked for (:mod:`~jigsaw.policies.allocator.knowledge`).
2. **Configurations** as columns: off, and an exclusive column per allowed size
   (:mod:`~jigsaw.policies.allocator.configurations`); with ``guests`` on, guest columns (a
   one-GPU job on a slot of a running gang's GPUs) and, with ``hosts`` on, SPB host columns
   (a gang switching to a staircase in place to leave its partial ranks' GPUs to guests,
   :mod:`~jigsaw.policies.allocator.cotenancy`).
3. **Costs**: Pollux's objective generalised (:mod:`~jigsaw.policies.allocator.objective`).
4. **Solve**: exactly one column per job, within the GPUs, each guest on a chosen host's slot
   (:mod:`~jigsaw.policies.allocator.solve`): the exact dynamic program when no guest column is
   offered, else HiGHS, never worse than the dynamic program's answer.
5. **Place** (:mod:`~jigsaw.policies.allocator.place`) and emit, shrinks before grows and
   starts, each change naming its gain.

With ``guests`` and ``hosts`` off (and the default objective knobs) the columns and costs
are pollux's, so the decisions are pollux's (tests/core/policies/test_allocator_containment.py).
The policy keeps no state between rounds; its plan catalog is a memo of oracle figures.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from jigsaw.goodput.source import GoodputSource, JobGoodput
from jigsaw.model.cluster import Placement
from jigsaw.model.decisions import Decision, Preempt, Replan, Resize, Start
from jigsaw.model.domain import Job
from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.plan import Plan, SPBPlan
from jigsaw.model.snapshot import Snapshot
from jigsaw.oracle import Oracle
from jigsaw.planning.planner import Planner
from jigsaw.policies.allocator.config import JigsawConfig
from jigsaw.policies.allocator.configurations import (
    GUEST,
    HOST,
    OFF,
    Column,
    JobView,
    Problem,
    exclusive_problem,
)
from jigsaw.policies.allocator.cotenancy import Cotenancy, guest_hosts
from jigsaw.policies.allocator.knowledge import worker_batch
from jigsaw.policies.allocator.objective import Objective
from jigsaw.policies.allocator.place import place
from jigsaw.policies.allocator.solve import Solution, solve
from jigsaw.policies.base import PolicyBase, register
from jigsaw.policies.shared.plans import EtaOf, PlanCatalog
from jigsaw.policies.shared.pollux_allocation import Infeasible

__all__ = ["JigsawConfig", "JigsawPolicy"]


@dataclass(frozen=True, slots=True)
class RoundResult:
    """One round's problem, answer and GPUs: what :meth:`JigsawPolicy.solve_round` returns
    (tests compare objective values through it)."""

    problem: Problem
    solution: Solution
    placements: dict[int, Placement]


class JigsawPolicy(PolicyBase):
    name = "jigsaw"
    periodic = True

    def __init__(
        self,
        oracle: Oracle,
        planner: Planner,
        *,
        config: JigsawConfig | None = None,
        goodput: GoodputSource | None = None,
        eta_of: EtaOf | None = None,
    ) -> None:
        """``eta_of``: SPB's eta by model and plan in place of the oracle's (a test seam)."""
        if goodput is not None and not callable(getattr(goodput, "job_goodput", None)):
            raise InvalidSpecError(
                "jigsaw's goodput option is the simulator's source of job reports, "
                "not a JSON value",
                field="policy_options",
            )
        self.oracle = oracle
        self.planner = planner
        self.config = config if config is not None else JigsawConfig()
        self._source = goodput if self.config.knowledge == "reports" else None
        self.resizes_running_jobs = self._source is not None or self.config.guests
        """Sizes move round after round when jobs report; slots open as gangs run."""
        self.catalog = PlanCatalog(oracle, spb=self.config.hosts, eta_of=eta_of, planner=planner)
        self._last_round: tuple[Snapshot, RoundResult | None] | None = None
        """The last round decided (a memo for :meth:`stable_until`, asked of the same
        snapshot right after; it never changes a decision)."""

    def decide(self, snapshot: Snapshot) -> list[Decision]:
        result = self.solve_round(snapshot)
        self._last_round = (snapshot, result)
        if result is None:
            return []
        return self._decisions(result)

    def stable_until(self, snapshot: Snapshot) -> float | None:
        """After a round with no decisions: until when the same world keeps that answer.

        Between events a round's prices move only through a restarted job's discount (it
        rises with the job's age), the guests' prices and the elastic jobs' reports; a
        job's weight is fixed while it runs or waits (it counts the service it had when
        its run began). So a round is stable when:

        - no elastic job the goodput source knows, no guest running, no co-tenancy
          offered;
        - either every running job is pinned or protected (no off column: a waiting job
          can only start on free GPUs, where none fitted, and a waiting job's value only
          rises), or no waiting job's discount moves (never started, with a free launch),
          so every column's cost stays what it is;
        - no running job is starving beside a waiting one that starves (the longest
          waiters run first, and only the waiting ones' waits grow).

        Then the answer holds until a protection or hold ends, a waiting job starts
        starving, a restarted job's discount leaves zero, or a back-off ends; with nothing
        waiting, until the next arrival or finish. ``None`` otherwise: ask every round.
        """
        last = self._last_round
        result = last[1] if last is not None and last[0] is snapshot else None
        if result is None:
            if not snapshot.running and not snapshot.waiting:
                return math.inf
            result = self.solve_round(snapshot)
            if result is None:
                return math.inf
        problem, now = result.problem, snapshot.now
        if problem.cotenancy_offered:
            return None
        objective = Objective(self.config, now, 1)
        evictable = starving_runs = moving_prices = starving_waits = False
        for index, view in enumerate(problem.views):
            job = view.job
            if view.guest_of is not None:
                return None
            if view.goodput is not None and job.spec.is_elastic:
                return None
            if view.current:
                if any(problem.columns[c].kind == OFF for c in problem.by_job[index]):
                    evictable = True
                    starving_runs = starving_runs or objective.starving(job)
            else:
                moving_prices = moving_prices or self._discount_moves(job)
                starving_waits = starving_waits or objective.starving(job)
        if (evictable and moving_prices) or (starving_runs and starving_waits):
            return None
        return min(
            self._crossings(problem, now),
            snapshot.next_retry_at if snapshot.next_retry_at is not None else math.inf,
        )

    def _discount_moves(self, job: Job) -> bool:
        """The waiting job's restart discount changes with its age (see
        :meth:`Objective.discount`): it has run before and restarts cost time, or its launch
        does."""
        if job.attempt == 0:
            return self.config.launch_s > 0
        restart = job.resize_s if job.resize_s is not None else self.config.restart_s
        return restart > 0

    def _crossings(self, problem: Problem, now: float) -> float:
        """The first moment after ``now`` at which a pin, protection or price changes by
        itself: a hold or minimum run ends, a waiting job starts starving, a restarted
        job's discount leaves zero."""
        config = self.config
        objective = Objective(config, now, 1)
        found = math.inf
        for view in problem.views:
            job = view.job
            if view.current:
                if job.run_started_at is None:
                    continue  # admitted: pinned until its start (an executor event)
                since = max(t for t in (job.run_started_at, job.resized_at, 0.0) if t is not None)
                for hold in (config.min_hold_s, config.min_run_s):
                    if hold > 0 and since + hold > now:
                        found = min(found, since + hold)
                continue
            waited = objective.waited_s(job)
            if math.isfinite(config.promote_s) and waited <= config.promote_s:
                found = min(found, now + (config.promote_s - waited))
            restarts = max(job.attempt - 1, 0) + job.resizes
            zero_until = job.submitted_at + restarts * objective.restart_s(job)
            if zero_until > now:
                found = min(found, zero_until)
        return found

    def solve_round(self, snapshot: Snapshot) -> RoundResult | None:
        jobs = [*snapshot.running, *snapshot.waiting]
        if not jobs:
            return None
        cluster, now = snapshot.cluster, snapshot.now
        per_node = max((node.num_gpus for node in cluster.alive_nodes), default=1)
        objective = Objective(self.config, now, per_node)
        goodputs = [self._goodput(job, now) for job in jobs]
        guests_of = guest_hosts(snapshot.running)
        for relax_guests in (False, True):
            problem = exclusive_problem(
                jobs,
                goodputs,
                guests_of,
                objective,
                cluster.num_gpus,
                per_node,
                self.config,
                relax_guests=relax_guests,
            )
            if self.config.guests:
                Cotenancy(
                    self.catalog, self.oracle, self.planner, objective, self.config
                ).add_columns(problem, cluster)
            try:
                solution = solve(problem, self.config.solver_time_s, self.config.mip_rel_gap)
                break
            except Infeasible:
                if relax_guests or not guests_of:
                    raise
        return RoundResult(problem, solution, place(problem, solution.chosen, cluster))

    def _goodput(self, job: Job, now: float) -> JobGoodput | None:
        return self._source.job_goodput(job, now) if self._source is not None else None

    # -- decisions ----------------------------------------------------------------------------
    def _decisions(self, result: RoundResult) -> list[Decision]:
        problem, chosen, placements = result.problem, result.solution.chosen, result.placements
        preempts: list[Decision] = []
        resizes: list[tuple[int, Decision]] = []
        replans: list[Decision] = []
        moves: list[Decision] = []
        starts: list[Decision] = []
        guests_on = _guests_by_host(problem, chosen, placements)
        for index, view in enumerate(problem.views):
            column = problem.columns[chosen[index]]
            placement = placements[index]
            job = view.job
            keep = problem.keep_column(index)
            was = problem.columns[keep].speedup if keep is not None else 0.0
            if view.current and not placement:
                preempts.append(Preempt(job.id, "jigsaw: off this round: others gain more"))
            elif not view.current and placement:
                starts.append(self._start(problem, view, column, placement))
            elif view.guest_of is not None and placement != view.current:
                plan = column.plan if column.plan is not None else self._plan(view, placement)
                moves.append(Replan(job.id, plan, placement, _moved(view, column, placement)))
            elif view.current and placement != view.current and view.resizable:
                batch = worker_batch(job, view.goodput, placement)
                assert batch is not None
                plan = self.planner.resized_plan(job, len(placement))
                reason = _resized(view, placement, batch, was, column.speedup)
                resize = Resize(job.id, placement, plan, batch, reason)
                resizes.append((len(placement) - len(view.current), resize))
            elif column.kind == HOST and column.plan is not None and column.plan != job.plan:
                replans.append(self._host_replan(problem, view, column, guests_on, chosen, was))
        # Shrinks free GPUs before grows and starts take them; hosts switch before guests move.
        ordered = [d for _, d in sorted(resizes, key=lambda pair: pair[0])]
        return [*preempts, *ordered, *replans, *moves, *starts]

    def _host_replan(
        self,
        problem: Problem,
        view: JobView,
        column: Column,
        guests_on: dict[int, list[int]],
        chosen: Sequence[int],
        was: float,
    ) -> Replan:
        job, plan = view.job, column.plan
        assert plan is not None
        guests = guests_on.get(chosen[column.job], [])
        if isinstance(plan, SPBPlan) and plan.is_full_backprop:
            change = _percent(column.speedup, was)
            reason = f"jigsaw: back to full backprop on {job.id}: goodput {change}"
            return Replan(job.id, plan, view.current, reason)
        gain = sum(problem.columns[chosen[g]].speedup for g in guests)
        names = ", ".join(problem.views[g].job.id for g in guests) or "nobody"
        reason = (
            f"jigsaw: SPB {_label(plan)} on {job.id}: slack for {names}, "
            f"goodput of it and its guests {_percent(column.speedup + gain, was)}"
        )
        return Replan(job.id, plan, view.current, reason)

    def _start(
        self, problem: Problem, view: JobView, column: Column, placement: Placement
    ) -> Start:
        job = view.job
        batch = worker_batch(job, view.goodput, placement)
        total = f", batch {batch * len(placement)}" if batch is not None else ""
        if column.kind == GUEST and column.needs is not None:
            plan = column.plan if column.plan is not None else self._plan(view, placement)
            host = problem.views[problem.columns[column.needs].job].job.id
            gpu = placement[0]
            reason = (
                f"jigsaw: packed into {host}'s GPU {gpu[0]}:{gpu[1]}, "
                f"goodput {column.speedup:.2f} of a fair share{total}"
            )
            return Start(job.id, placement, plan, reason, worker_batch=batch)
        plan = self._plan(view, placement)
        reason = f"jigsaw: start on {len(placement)} GPUs{total}"
        return Start(job.id, placement, plan, reason, worker_batch=batch)

    def _plan(self, view: JobView, placement: Placement) -> Plan:
        if view.goodput is not None:
            return self.planner.resized_plan(view.job, len(placement))
        return self.planner.start_plan(view.job)


def _guests_by_host(
    problem: Problem, chosen: Sequence[int], placements: dict[int, Placement]
) -> dict[int, list[int]]:
    found: dict[int, list[int]] = {}
    for job, index in enumerate(chosen):
        column = problem.columns[index]
        if column.kind == GUEST and column.needs is not None and placements[job]:
            found.setdefault(column.needs, []).append(job)
    return found


def _percent(after: float, before: float) -> str:
    if before <= 0:
        return "new"
    return f"{after / before - 1.0:+.0%}"


def _resized(view: JobView, placement: Placement, batch: int, before: float, after: float) -> str:
    old, new = len(view.current), len(placement)
    verb = "grew" if new > old else "shrank" if new < old else "moved"
    return f"jigsaw: {verb} {old}→{new}: goodput {_percent(after, before)}, batch {batch * new}"


def _moved(view: JobView, column: Column, placement: Placement) -> str:
    gpu = placement[0]
    where = "a GPU of its own" if column.kind != GUEST else f"GPU {gpu[0]}:{gpu[1]}"
    return f"jigsaw: guest of {view.guest_of} moves to {where}"


def _label(plan: Plan) -> str:
    depths = getattr(plan, "depths", None)
    return f"depths {tuple(depths)}" if depths is not None else type(plan).__name__


register("jigsaw", uses=frozenset({"oracle", "planner", "goodput"}))(JigsawPolicy)
