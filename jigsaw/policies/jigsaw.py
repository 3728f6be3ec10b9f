"""JigSaw: one configuration for every job each round, chosen jointly by one goodput model.

A round, read top to bottom (docs/SCHEDULER.md, "jigsaw" has the why):

1. **Knowledge.** What each job can do at every size it may take: elastic jobs from the
   goodput source (their agents' reports, as pollux sizes them); every other job keeps the
   size it asked for (:mod:`~jigsaw.policies.allocator.knowledge`).
2. **Configurations** as columns: off, and an exclusive column per allowed size
   (:mod:`~jigsaw.policies.allocator.configurations`); with ``guests`` on, guest columns (a
   one-GPU job on a slot of a running gang's GPUs) and, with ``hosts`` on, SPB host columns
   (a gang switching to a staircase in place to leave its partial ranks' GPUs to guests,
   :mod:`~jigsaw.policies.allocator.cotenancy`). A never-run rigid job that waits whatever
   the round decides, behind as many earlier ones of its size as the GPUs could run, gets
   none (:mod:`~jigsaw.policies.shared.backlog`).
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from jigsaw.goodput.source import GoodputSource, JobGoodput
from jigsaw.model.cluster import Cluster, Placement
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
    Column,
    JobView,
    Problem,
    exclusive_problem,
)
from jigsaw.policies.allocator.cotenancy import Cotenancy
from jigsaw.policies.allocator.gang_offers import GangOfferMemo
from jigsaw.policies.allocator.guest_bound import guests_may_pay
from jigsaw.policies.allocator.job_memo import JobMemo
from jigsaw.policies.allocator.knowledge import worker_batch
from jigsaw.policies.allocator.longest_job import (
    NO_PATH,
    CriticalPath,
    WaitingWork,
    critical_path,
    longest_critical,
    of_longest,
)
from jigsaw.policies.allocator.objective import Objective
from jigsaw.policies.allocator.place import place
from jigsaw.policies.allocator.reasons import label, moved, percent, resized
from jigsaw.policies.allocator.remaining import RunningSeconds, WorkLeft
from jigsaw.policies.allocator.round_backlog import round_backlog, set_aside_cost
from jigsaw.policies.allocator.row_memo import RowMemo
from jigsaw.policies.allocator.sharing import GuestHostsMemo
from jigsaw.policies.allocator.solution import Solution
from jigsaw.policies.allocator.solve import SolverLimits, solve, solve_exclusive_round
from jigsaw.policies.allocator.stability import stable_until
from jigsaw.policies.base import PolicyBase, register
from jigsaw.policies.shared.plans import EtaOf, PlanCatalog
from jigsaw.policies.shared.pollux_allocation import Infeasible
from jigsaw.policies.shared.program_memo import ProgramMemo

__all__ = ["JigsawConfig", "JigsawPolicy"]


@dataclass(frozen=True, slots=True)
class RoundResult:
    """One round's problem, answer and GPUs: what :meth:`JigsawPolicy.solve_round` returns
    (tests compare objective values through it)."""

    problem: Problem
    solution: Solution
    placements: dict[int, Placement]
    objective: Objective


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
        incremental: bool = True,
    ) -> None:
        """``eta_of``: SPB's eta by model and plan in place of the oracle's (a test seam).
        ``incremental=False``: what running gangs offer co-tenancy is read afresh each round
        instead of kept from the last, every job's columns are built anew, and the size
        program runs over every job (the same decisions, for more work)."""
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
        config = self.config
        self._limits = SolverLimits(config.solver_nodes, config.solver_time_s, config.mip_rel_gap)
        self._offers = GangOfferMemo(
            self.catalog, hosts=config.hosts, host_keep=config.host_keep, keep=incremental
        )
        """What each running gang offers co-tenancy, by its plan and GPUs (a memo of oracle
        figures, as the catalog is; :mod:`~jigsaw.policies.allocator.gang_offers`)."""
        self._program = ProgramMemo() if incremental else None
        """The round's size program as it last ran: the next adds only the jobs after the
        first that differs (:mod:`~jigsaw.policies.shared.program_memo`)."""
        self._rows = RowMemo() if incremental else None
        """The last round's leading steady jobs, their views and columns
        (:mod:`~jigsaw.policies.allocator.row_memo`)."""
        self._shares: dict[tuple[object, ...], tuple[float, float] | None] = {}
        """Co-location shares of a guest and a host on a slot (oracle figures, per guest
        model, batch, plan and host timing; :class:`~jigsaw.policies.allocator.cotenancy.
        Cotenancy`)."""
        self._work = WorkLeft(self.catalog)
        """Each job's seconds of work left, its pace kept while it is the same object."""
        self._weights: JobMemo[float] | None = JobMemo() if incremental else None
        """Each job's weight, kept while it is the same object (without aging)."""
        self._running_seconds = RunningSeconds(self._work) if incremental else None
        """The running jobs' seconds left as arrays, kept while they are the same jobs."""
        self._waiting_work = WaitingWork() if incremental else None
        """The waiting side's work left, kept while it is the same jobs (the critical path's
        drain horizon)."""
        self._guest_hosts = GuestHostsMemo(keep=incremental)
        """Who runs as whose guest, kept while the running side is the same jobs."""
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
        """After a round with no decisions: until when the same world keeps that answer
        (:func:`~jigsaw.policies.allocator.stability.stable_until`); the round is the one
        :meth:`decide` just solved for this snapshot, else solved afresh."""
        last = self._last_round
        result = last[1] if last is not None and last[0] is snapshot else None
        if result is None:
            if not snapshot.running and not snapshot.waiting:
                return math.inf
            result = self.solve_round(snapshot)
            if result is None:
                return math.inf
        problem, chosen = result.problem, result.solution.chosen
        return stable_until(problem, chosen, snapshot, result.objective, self._program)

    def solve_round(self, snapshot: Snapshot) -> RoundResult | None:
        if not snapshot.running and not snapshot.waiting:
            return None
        cluster, now = snapshot.cluster, snapshot.now
        self._work.next_round()
        per_node = max((node.num_gpus for node in cluster.alive_nodes), default=1)
        if self._weights is not None:
            self._weights.next_round()
        objective = Objective(
            self.config, now, per_node, work_left_s=self._work_left(now), weights=self._weights
        )
        critical = self._critical(snapshot)
        backlog = round_backlog(
            snapshot,
            objective,
            lambda job: self._goodput(job, now),
            keep=frozenset(critical.waiting),
        )
        jobs = [*snapshot.running, *backlog.waiting]
        goodputs = [*(self._goodput(job, now) for job in snapshot.running), *backlog.goodputs]
        guests_of = self._guest_hosts.of(snapshot.running)
        aside_cost = set_aside_cost(snapshot, backlog, objective)
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
                population=len(snapshot.running) + len(snapshot.waiting),
                remaining_s=lambda job: self._work.seconds(job, now, job.state.holds_resources),
                rows=self._rows,
                critical=critical,
            )
            problem.set_aside_cost = aside_cost
            problem.stable_by_clock_until = critical.until
            try:
                solution = self._solve(problem, objective, cluster)
                break
            except Infeasible:
                if relax_guests or not guests_of:
                    raise
        placements = place(problem, solution.chosen, cluster)
        return RoundResult(problem, solution, placements, objective)

    def _solve(self, problem: Problem, objective: Objective, cluster: Cluster) -> Solution:
        """Co-tenancy's columns, then the answer. Guests are priced only where they could
        beat the exclusive optimum even at their floor prices (a one-GPU job on a free GPU
        of its own runs cheaper than on any slot): HiGHS would keep no answer with them."""
        if not self.config.guests:
            return solve(problem, self._limits, memo=self._program)
        cotenancy = Cotenancy(
            self.catalog,
            self.oracle,
            self.planner,
            objective,
            self.config,
            offers=self._offers,
            work=self._work,
            shares=self._shares,
        )
        if not cotenancy.offer_slots(problem, cluster):
            return solve(problem, self._limits, memo=self._program)
        # The guest bound's curve resumes from the round's own program (its jobs lead it).
        memo = self._program
        exclusive = solve_exclusive_round(problem, memo, memo.trial() if memo else None)
        floors = cotenancy.guest_price_floors(problem)
        if floors is not None and not guests_may_pay(problem, exclusive, floors):
            return exclusive.solution
        cotenancy.add_guests(problem)
        return solve(problem, self._limits, exclusive)

    def _work_left(self, now: float) -> Callable[[Job], float] | None:
        """For ``remaining_weight``: a job's seconds of work left as its record counts them
        (not the progress of its current run since: the weight holds between events)."""
        if self.config.remaining_weight <= 0:
            return None
        return lambda job: self._work.seconds(job, now, False)

    def _critical(self, snapshot: Snapshot) -> CriticalPath:
        """The jobs kept on the critical path, with ``protect_longest`` on: within
        ``critical_share`` of the GPUs, or the longest running job alone at 0."""
        if not self.config.protect_longest:
            return NO_PATH
        now = snapshot.now

        def left(job: Job, running: bool) -> float:
            return self._work.seconds(job, now, running)

        def many(jobs: Sequence[Job], running: bool) -> list[float]:
            return self._work.seconds_many(jobs, now, running)

        config, capacity = self.config, snapshot.cluster.num_gpus
        if config.critical_share <= 0:
            found = longest_critical(
                snapshot.running, snapshot.waiting, capacity, now, left, self._waiting_work, many
            )
            return of_longest(found)
        kept = self._running_seconds
        return critical_path(
            snapshot.running,
            snapshot.waiting,
            capacity,
            now,
            left,
            config.critical_share,
            config.critical_hold,
            self._waiting_work,
            many,
            (lambda jobs: kept.of(jobs, now)) if kept is not None else None,
        )

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
            if view.current and not placement:
                preempts.append(Preempt(job.id, "jigsaw: off this round: others gain more"))
            elif not view.current and placement:
                starts.append(self._start(problem, view, column, placement))
            elif view.guest_of is not None and placement != view.current:
                plan = column.plan if column.plan is not None else self._plan(view, placement)
                moves.append(Replan(job.id, plan, placement, moved(view, column, placement)))
            elif view.current and placement != view.current and view.resizable:
                batch = worker_batch(job, view.goodput, placement)
                assert batch is not None
                plan = self.planner.resized_plan(job, len(placement))
                reason = resized(view, placement, batch, _was(problem, index), column.speedup)
                resize = Resize(job.id, placement, plan, batch, reason)
                resizes.append((len(placement) - len(view.current), resize))
            elif column.kind == HOST and column.plan is not None and column.plan != job.plan:
                was = _was(problem, index)
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
            change = percent(column.speedup, was)
            reason = f"jigsaw: back to full backprop on {job.id}: goodput {change}"
            return Replan(job.id, plan, view.current, reason)
        packed = [problem.columns[chosen[g]] for g in guests]
        gain = sum(c.speedup for c in packed) - max((c.host_loss for c in packed), default=0.0)
        names = ", ".join(problem.views[g].job.id for g in guests) or "nobody"
        reason = (
            f"jigsaw: SPB {label(plan)} on {job.id}: slack for {names}, "
            f"goodput of it and its guests {percent(column.speedup + gain, was)}"
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


def _was(problem: Problem, job: int) -> float:
    """The job's speedup at the size it holds now (0: it waits, or is a guest), read only
    for the changes whose reasons name it (most jobs keep their column: no scan)."""
    keep = problem.keep_column(job)
    return problem.columns[keep].speedup if keep is not None else 0.0


def _guests_by_host(
    problem: Problem, chosen: Sequence[int], placements: dict[int, Placement]
) -> dict[int, list[int]]:
    found: dict[int, list[int]] = {}
    for job, index in enumerate(chosen):
        column = problem.columns[index]
        if column.kind == GUEST and column.needs is not None and placements[job]:
            found.setdefault(column.needs, []).append(job)
    return found


register("jigsaw", uses=frozenset({"oracle", "planner", "goodput"}))(JigsawPolicy)
