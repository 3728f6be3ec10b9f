"""The price of an elastic resize: whether the seconds it saves pay for the seconds it costs.

The simple elastic rule (:mod:`jigsaw.policies.jigsaw_parts.elastic_rule`) asks this module three
things:

- **hold**: a job resized less than ``hold x cost`` seconds ago keeps its size (hysteresis:
  a resize pays only if the size it buys lasts a few times what it cost);
- **grow**: a job at ``n`` workers with ``R`` iterations left grows to ``m`` only when
  ``R / rate(n) - R / rate(m) > (1 + margin) x cost``: the time it saves pays for this
  resize and, by ``margin``, for the shrink that may undo it;
- **shrink**: a job shrinks to ``k`` workers for the waiters the freed GPUs let start only
  when what they gain (each would otherwise wait until the job ends, ``R / rate(n)``) exceeds
  what the job loses (it runs at ``rate(k)`` while the waiters run, ``D``: ``min(D x (1 -
  rate(k) / rate(n)), R / rate(k) - R / rate(n))``) plus ``(1 + margin) x cost`` (this resize
  and growing back).

Rates are the oracle's goodput at full backprop on the placement the rule chose, at the
worker batch the size implies; the cost is
:class:`~jigsaw.policies.jigsaw_parts.resize_cost.ResizeCosts`'
estimate. A job whose rate the oracle cannot predict is not resized.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from jigsaw.model.cluster import Placement
from jigsaw.model.domain import Job
from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.plan import full_backprop
from jigsaw.model.snapshot import Snapshot
from jigsaw.oracle import Oracle
from jigsaw.policies.jigsaw_parts.resize_cost import ResizeCosts


@dataclass(frozen=True, slots=True)
class PricingTerms:
    margin: float = 1.0
    """A resize must save ``(1 + margin)`` times its cost (1.0: it pays for the one undoing it)."""
    hold: float = 4.0
    """No resize within ``hold x cost`` seconds of the last one (4: at most a fifth of a
    job's time goes to resizes)."""

    def __post_init__(self) -> None:
        if self.margin < 0 or self.hold < 0:
            raise ValueError("the resize margin and hold must be >= 0")


class ResizePricing:
    def __init__(self, oracle: Oracle, costs: ResizeCosts, terms: PricingTerms) -> None:
        self.oracle = oracle
        self.costs = costs
        self.terms = terms

    def seeing(self, snapshot: Snapshot) -> ResizePricing:
        """This pricing with the resize costs measured on ``snapshot``'s jobs (a new object:
        the round prices with it, and nothing is kept)."""
        jobs = (*snapshot.running, *snapshot.waiting)
        return ResizePricing(self.oracle, self.costs.seeing(jobs), self.terms)

    def rate(self, job: Job, batch: int, placement: Placement) -> float | None:
        """Iterations per second at full backprop on ``placement``, ``batch`` per worker."""
        blocks = job.plan.num_blocks if job.plan is not None else None
        try:
            blocks = blocks if blocks is not None else self.oracle.num_blocks(job.spec.model)
            plan = full_backprop(len(placement), blocks)
            rate = self.oracle.goodput(job.spec.model, batch, plan, placement)
        except InvalidSpecError:
            return None
        return rate if rate > 0 else None

    def cost_s(self, job: Job) -> float | None:
        """The job's resize cost at its current size (``None``: its rate is unknown)."""
        now_rate = self.rate(job, job.current_worker_batch, job.placement)
        return None if now_rate is None else self.costs.estimate_s(job, 1.0 / now_rate)

    def held(self, job: Job, now: float) -> bool:
        """Resized too recently to be resized again (or not priceable at all)."""
        cost = self.cost_s(job)
        if cost is None:
            return True
        return job.resized_at is not None and now < job.resized_at + self.terms.hold * cost

    def grow_gain_s(self, job: Job, batch: int, placement: Placement) -> float | None:
        """Seconds growing to ``placement`` saves beyond what it must pay (``None``: it does
        not pay)."""
        now_rate = self.rate(job, job.current_worker_batch, job.placement)
        new_rate = self.rate(job, batch, placement)
        if now_rate is None or new_rate is None:
            return None
        left = job.remaining_iterations
        saved = left / now_rate - left / new_rate
        net = saved - (1.0 + self.terms.margin) * self.costs.estimate_s(job, 1.0 / now_rate)
        return net if net > 0 else None

    def shrink_pays(
        self,
        job: Job,
        batch: int,
        placement: Placement,
        helped: Sequence[Job],
        gpus_per_node: int,
    ) -> bool:
        """Whether shrinking ``job`` to ``placement`` pays for the ``helped`` waiters."""
        now_rate = self.rate(job, job.current_worker_batch, job.placement)
        small_rate = self.rate(job, batch, placement)
        if not helped or now_rate is None or small_rate is None:
            return False
        left = job.remaining_iterations
        until_done = left / now_rate
        gained = until_done * len(helped)
        runs = [run for waiter in helped if (run := self._run_s(waiter, gpus_per_node))]
        slower = left / small_rate - until_done
        # Slower while the waiters run; a waiter of unknown speed may outlast the job.
        lost = slower
        if len(runs) == len(helped):
            lost = min(max(runs) * (1.0 - small_rate / now_rate), slower)
        cost = self.costs.estimate_s(job, 1.0 / now_rate)
        return gained > max(lost, 0.0) + (1.0 + self.terms.margin) * cost

    def _run_s(self, waiter: Job, gpus_per_node: int) -> float | None:
        """How long a waiter would hold GPUs: its work left at its speed alone, compact."""
        try:
            rate = self.oracle.full_rate(
                waiter.spec.model, waiter.current_worker_batch, waiter.spec.workers, gpus_per_node
            )
        except InvalidSpecError:
            return None
        return waiter.remaining_iterations / rate if rate > 0 else None
