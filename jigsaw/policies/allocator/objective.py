"""The round's objective: Pollux's, generalised, as a cost per (job, configuration) to minimise.

A job ``j`` in a configuration with speedup ``s`` (its goodput over the goodput at its fair
share, ``ceil(GPUs / jobs)`` GPUs on one node) contributes

    w_j x ((s x discount / gpus_per_node) + guard) ** p   (x (1 + churn) if it changes)

- ``p = fairness_power`` (-0.5 by default; -1 is the harmonic-mean form Pollux maximises);
  a job left out costs ``guard ** p`` (31.6 at -0.5, 1,000 at -1) and dominates, so every
  job runs while GPUs last;
- ``discount`` = ``max(age - restarts x r, 0) / (age + r)`` for a configuration that restarts
  the job, with ``r`` the job's *measured* restart (``Job.resize_s``), else the prior, and
  ``restarts`` its preemptions plus ``Job.resizes``; a job that has never run pays its
  launch instead (``launch_s``: 0 where a trace's run times include it, Pollux's 30 s under
  its semantics); 1 for the configuration it runs now;
- ``w_j = (1 + service_weight x T / (T + attained)) x priority weight``: little attained
  service weighs more (Tiresias' idea, in the objective instead of a separate ranking), and so
  does a higher ``priority`` (``1 + p``; ``1 / (1 - p)`` below 0, as max-min weighs it);
  ``attained`` is what the job had when its current run began, so a weight does not decay
  while the job runs; with ``wait_weight`` (off by default) it also grows by
  ``wait_weight x waited / T`` while the job waits (aging);
- ``churn``: a small bias towards the configuration a job has.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from jigsaw.model.domain import Job
from jigsaw.policies.allocator.config import JigsawConfig
from jigsaw.policies.allocator.job_memo import JobMemo
from jigsaw.policies.shared.fairness import priority_weight

ZERO_GUARD = 1e-3
"""Added to every scaled speedup, so a job left out costs 1,000 rather than infinity."""


@dataclass(frozen=True, slots=True)
class Objective:
    config: JigsawConfig
    now: float
    per_node: int
    work_left_s: Callable[[Job], float] | None = None
    """A job's seconds of work left as its record counts them (its iterations done at its
    run's start or its last progress report, not the progress since), for
    ``remaining_weight`` (:mod:`.remaining`): a weight that holds between events. ``None``:
    that weight is off."""
    weights: JobMemo[float] | None = None
    """Weights kept between rounds by the policy (not with aging on: they read the clock)."""

    def weight(self, job: Job) -> float:
        """The job's weight, from the service it had attained when its current run began
        (for a waiting job: all it has had). It does not decay while the job runs, so the
        weight decides who starts and who yields to whom at a restart, but a running job
        is never evicted merely for having run (that made it a preemptive LAS, whose
        30-minute quantum cost 26,389 preemptions on a Philly fortnight), and a round's
        prices stay put between events (:meth:`~jigsaw.policies.jigsaw.JigsawPolicy.
        stable_until`)."""
        config = self.config
        memo = self.weights if config.wait_weight <= 0 else None
        if memo is not None:
            kept = memo.get(job)
            if kept is not None:
                return kept
        attained = job.attained_gpu_seconds
        weight = 1.0
        if config.service_weight > 0:
            scale = config.service_scale_s
            weight += config.service_weight * scale / (scale + attained)
        if config.wait_weight > 0:
            weight += config.wait_weight * self.waited_s(job) / config.service_scale_s
        if config.remaining_weight > 0 and self.work_left_s is not None:
            left = self.work_left_s(job)
            if math.isfinite(left):
                scale = config.service_scale_s
                weight += config.remaining_weight * scale / (scale + left)
        weight *= priority_weight(job.spec.priority)
        if memo is not None:
            memo.put(job, weight)
        return weight

    def starving(self, job: Job) -> bool:
        """Waited longer than ``promote_s``: the pin may make the round run it (the longest
        waiter of the waiting ones, and every such job that runs; a pin, not a price: a job
        left out costs the same whatever its size, so no weight lets a big gang win against
        a stream of small jobs that all wait as long)."""
        promote_s = self.config.promote_s
        return promote_s != math.inf and self.waited_s(job) > promote_s

    def waited_s(self, job: Job) -> float:
        """Seconds the job has waited, at least: its age less its attained GPU-seconds per
        GPU of its smallest size (it ran at least that long if it got any service; running
        at more GPUs only makes the estimate smaller). It stops growing while the job runs."""
        age = max(self.now - job.submitted_at, 0.0)
        fewest = max(job.spec.worker_range[0], 1)
        return max(age - job.attained_service(self.now) / fewest, 0.0)

    def restart_s(self, job: Job) -> float:
        return job.resize_s if job.resize_s is not None else self.config.restart_s

    def discount(self, job: Job) -> float:
        """Pollux's ``max(age - restarts x r, 0) / (age + r)``, where ``r`` is what this
        change will cost: a restart, or for a job that has never run its launch."""
        first = job.attempt == 0 and not job.state.holds_resources
        cost = self.config.launch_s if first else self.restart_s(job)
        restarts = max(job.attempt - 1, 0) + job.resizes
        age = max(self.now - job.submitted_at, 0.0)
        if age + cost <= 0:
            return 1.0  # the change is free and the job is new: nothing to discount
        return max(age - restarts * self.restart_s(job), 0.0) / (age + cost)

    def costs(
        self, job: Job, speedups: NDArray[np.float64], changed: NDArray[np.bool_]
    ) -> NDArray[np.float64]:
        """The job's term for each of its configurations (``speedups``; ``changed``: the
        configuration restarts or moves the job)."""
        count = len(speedups)
        weights = np.full(count, self.weight(job))
        discounts = np.full(count, self.discount(job))
        return self.costs_many(weights, discounts, speedups, changed)

    def costs_many(
        self,
        weights: NDArray[np.float64],
        discounts: NDArray[np.float64],
        speedups: NDArray[np.float64],
        changed: NDArray[np.bool_],
    ) -> NDArray[np.float64]:
        """:meth:`costs` of many jobs' configurations at once, element by element."""
        discount = np.where(changed, discounts, 1.0)
        scaled = speedups * discount / self.per_node
        terms = (scaled + ZERO_GUARD) ** self.config.fairness_power
        churn = np.where(changed, 1.0 + self.config.churn, 1.0)
        result: NDArray[np.float64] = weights * terms * churn
        return result

    def cost(self, job: Job, speedup: float, *, changed: bool) -> float:
        return self.term(self.weight(job), self.discount(job), speedup, changed=changed)

    def term(self, weight: float, discount: float, speedup: float, *, changed: bool) -> float:
        """:meth:`costs` for one configuration, from the job's weight and discount (the
        scalar path: co-tenancy prices thousands of pairs a round)."""
        config = self.config
        scaled = speedup * (discount if changed else 1.0) / self.per_node
        churn = 1.0 + config.churn if changed else 1.0
        term: float = weight * (scaled + ZERO_GUARD) ** config.fairness_power * churn
        return term
