"""Pollux (Qiao et al., OSDI 2021) as a policy: each round, every job's GPU count and batch.

Written from the paper and from petuum/adaptdl's osdi21-artifact simulator, read for its
meaning (docs/SCHEDULER.md, "pollux"). Each 60 s round:

1. **What each job can do.** Its goodput at every size it may take, from what its agent
   has reported (:class:`~jigsaw.goodput.source.GoodputSource`): the step-time model fitted
   to the shapes it has run and its gradient noise, at the goodput-optimal batch for that
   size (:meth:`~jigsaw.goodput.model.GoodputModel.best`). A job may take at most twice the
   most GPUs it has measured (one at first): it learns how it scales as it grows. A job that
   has measured nothing is assumed to scale perfectly.
2. **Speedup** of a size: its goodput over the goodput at the job's fair share (``ceil(GPUs
   / jobs)`` GPUs on one node). Any change to a job's allocation restarts it, so a changed
   size counts ``max(age - restarts x 30 s, 0) / (age + 30 s)`` of its speedup.
3. **Sizes** maximise the power mean with ``p = -1`` (a harmonic mean) of every job's
   speedup / GPUs per node, 0 for a job left out, each term guarded by
   ``+ 1e-3``: leaving a job out costs far more than slowing one down, so every job runs
   while GPUs last, and the rest go where they speed jobs up most.
   (:func:`~jigsaw.policies.shared.pollux_allocation.choose_options` over the sizes each job
   may take, exact where Pollux searches.)
4. **Placement** and decisions: kept sizes keep their GPUs; the rest are packed
   (:func:`~jigsaw.policies.shared.pollux_placement.pack`) and become Start, Resize (with the
   batch of step 1) or Preempt decisions.

Jobs that are not elastic, or that the source knows nothing of, keep the size they asked
for and are assumed to scale perfectly: the policy still shares the cluster fairly among
them, but only elastic jobs change size or batch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from jigsaw.goodput.source import GoodputSource, JobGoodput
from jigsaw.model.cluster import Placement
from jigsaw.model.decisions import Decision, Preempt, Resize, Start
from jigsaw.model.domain import Job
from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.lifecycle import JobState
from jigsaw.model.plan import Plan
from jigsaw.model.snapshot import Snapshot
from jigsaw.planning.planner import Planner
from jigsaw.policies.allocator.knowledge import size_choices, worker_batch
from jigsaw.policies.base import PolicyBase, register
from jigsaw.policies.shared.backlog import split_backlog
from jigsaw.policies.shared.pollux_allocation import choose_options
from jigsaw.policies.shared.pollux_placement import PackRequest, pack
from jigsaw.policies.shared.program_memo import ProgramMemo

RESTART_S = 30.0
"""What Pollux charges a reallocation, in the speedup it discounts and in the simulator."""
FAIRNESS_POWER = -1.0
"""Exponent of the power mean of speedups; more negative is fairer (Pollux uses -1)."""
ZERO_GUARD = 1e-3
"""Added to every scaled speedup, so a job left out costs 1,000 rather than infinity."""
MAX_NODES_PER_JOB = 16
"""Pollux never spreads one job over more nodes than this."""


@dataclass(frozen=True, slots=True)
class _JobView:
    job: Job
    current: Placement
    goodput: JobGoodput | None
    sizes: np.ndarray
    """The sizes it may take this round, ascending."""
    costs: np.ndarray
    """Its cost at each of them."""

    @property
    def resizable(self) -> bool:
        return self.goodput is not None and self.job.state is JobState.RUNNING


class PolluxPolicy(PolicyBase):
    name = "pollux"
    periodic = True

    def __init__(
        self,
        planner: Planner,
        *,
        goodput: GoodputSource | None = None,
        restart_s: float = RESTART_S,
        fairness_power: float = FAIRNESS_POWER,
    ) -> None:
        if goodput is not None and not callable(getattr(goodput, "job_goodput", None)):
            raise InvalidSpecError(
                "pollux's goodput option is the simulator's source of job reports, "
                "not a JSON value",
                field="policy_options",
            )
        if not fairness_power < 0:
            raise InvalidSpecError(
                f"fairness_power must be negative (Pollux uses -1), got {fairness_power}",
                field="policy_options",
            )
        self.planner = planner
        self._source = goodput
        self.resizes_running_jobs = goodput is not None
        """Without job reports nothing is resized: rounds are needed only when jobs wait."""
        self.restart_s = restart_s
        self.fairness_power = fairness_power
        self._program = ProgramMemo()
        """The size program's last run: a round adds only the jobs after the first that
        differs (the same answer, :mod:`~jigsaw.policies.shared.program_memo`)."""

    def decide(self, snapshot: Snapshot) -> list[Decision]:
        population = len(snapshot.running) + len(snapshot.waiting)
        if not population:
            return []
        cluster, now = snapshot.cluster, snapshot.now
        capacity = cluster.num_gpus
        per_node = max((node.num_gpus for node in cluster.alive_nodes), default=1)
        fair_share = max(math.ceil(capacity / population), 1)  # 1 when every node is lost
        # The fresh rigid jobs that wait whatever the program decides are not priced
        # (:mod:`~jigsaw.policies.shared.backlog`; a fresh job's price is its size's alone).
        backlog = split_backlog(snapshot.waiting, lambda job: self._goodput(job, now), capacity)
        jobs = [*snapshot.running, *backlog.waiting]
        goodputs = [*(self._goodput(job, now) for job in snapshot.running), *backlog.goodputs]
        views = [
            self._view(job, goodput, now, fair_share, capacity, per_node)
            for job, goodput in zip(jobs, goodputs, strict=True)
        ]
        picks = choose_options([(v.sizes, v.costs) for v in views], capacity, self._program)
        sizes = {v.job.id: int(v.sizes[pick]) for v, pick in zip(views, picks, strict=True)}
        requests = [
            PackRequest(
                v.job.id,
                sizes[v.job.id],
                v.current,
                min_size=sizes[v.job.id] if v.goodput is None else v.job.spec.worker_range[0],
            )
            for v in views
        ]
        placements = pack(requests, cluster)
        return self._decisions(views, placements)

    # -- 1-3: each job's costs of each size ------------------------------------------------
    def _goodput(self, job: Job, now: float) -> JobGoodput | None:
        source = self._source
        return source.job_goodput(job, now) if source is not None else None

    def _view(
        self,
        job: Job,
        goodput: JobGoodput | None,
        now: float,
        fair_share: int,
        capacity: int,
        per_node: int,
    ) -> _JobView:
        current = job.placement if job.state.holds_resources else ()
        allowed = _allowed_sizes(job, goodput, current, capacity, per_node)
        sizes = np.asarray(allowed, dtype=np.int64)
        # Priced at the allowed sizes only: element by element the same arithmetic as a
        # price for every size with inf at the forbidden ones (what the program ignores).
        speedup = size_choices(job, goodput, allowed, fair_share, per_node).speedups
        changed = sizes != len(current)
        discount = np.where(changed, self._restart_discount(job, now), 1.0)
        # A speedup of one node's worth of GPUs counts 1 (Pollux's dominant-share scaling).
        scaled = speedup * discount / per_node
        costs = (scaled + ZERO_GUARD) ** self.fairness_power
        return _JobView(job, current, goodput, sizes, costs)

    def _restart_discount(self, job: Job, now: float) -> float:
        """Pollux's ``max(age - restarts x delay, 0) / (age + delay)``."""
        restarts = max(job.attempt - 1, 0) + job.resizes
        age = max(now - job.submitted_at, 0.0)
        return max(age - restarts * self.restart_s, 0.0) / (age + self.restart_s)

    # -- 4: decisions ---------------------------------------------------------------------
    def _decisions(
        self, views: Sequence[_JobView], placements: dict[str, Placement]
    ) -> list[Decision]:
        preempts: list[Decision] = []
        resizes: list[tuple[int, Decision]] = []
        starts: list[Decision] = []
        for view in views:
            job, placement = view.job, placements[view.job.id]
            if placement == view.current:
                continue
            if view.current and not placement:
                preempts.append(Preempt(job.id, "pollux: no GPUs this round"))
            elif view.current and view.resizable:
                batch = worker_batch(view.job, view.goodput, placement)
                assert batch is not None
                reason = (
                    f"pollux: {len(view.current)} -> {len(placement)} GPUs, "
                    f"batch {batch * len(placement)}"
                )
                plan: Plan = self.planner.resized_plan(job, len(placement))
                resizes.append(
                    (
                        len(placement) - len(view.current),
                        Resize(job.id, placement, plan, batch, reason),
                    )
                )
            elif not view.current and placement:
                batch = worker_batch(view.job, view.goodput, placement)
                plan = (
                    self.planner.resized_plan(job, len(placement))
                    if view.goodput
                    else self.planner.start_plan(job)
                )
                total = f", batch {batch * len(placement)}" if batch is not None else ""
                starts.append(
                    Start(
                        job.id,
                        placement,
                        plan,
                        f"pollux: start on {len(placement)} GPUs{total}",
                        worker_batch=batch,
                    )
                )
        # Shrinks free GPUs before grows and starts take them.
        return [*preempts, *(d for _, d in sorted(resizes, key=lambda x: x[0])), *starts]


def _allowed_sizes(
    job: Job, goodput: JobGoodput | None, current: Placement, capacity: int, per_node: int
) -> list[int]:
    """The sizes Pollux lets the job take this round, ascending: the size it holds while it
    starts; else 0 and the size it asked for (nothing known), or ``min_workers`` up to twice
    its largest measured size within its limits."""
    if job.state is JobState.ADMITTED:
        return [len(current)]  # starting: it keeps what it was given this round
    if goodput is None:
        return [0, job.spec.workers] if 0 < job.spec.workers <= capacity else [0]
    low, high = job.spec.worker_range
    explored = max(2 * goodput.largest_measured, 1)
    cap = min(high, explored, goodput.limits.max_replicas(), capacity)
    cap = min(cap, MAX_NODES_PER_JOB * per_node)
    return [0, *range(max(low, 1), max(cap, min(low, capacity)) + 1)]


register("pollux", uses=frozenset({"planner", "goodput"}))(PolluxPolicy)
