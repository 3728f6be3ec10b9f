"""The order the configured policy takes waiting jobs in: what ``queue`` shows and what its
estimates replay (``squeue`` sorts by Slurm's priority the same way).

Each policy ranks its own way; this module asks the same ranking functions the policies use,
with the server's policy options, and never a ranking of its own:

- ``las`` and ``timeslice`` (on its default ``las`` base): priority, then the Tiresias queue of
  attained service (a starving job is promoted), then arrival;
- ``jigsaw`` (the joint allocator): a job that has waited past ``promote_s`` first (the round
  must run it), then by the objective's weight (priority, then little attained service), then
  arrival;
- ``maxmin`` and timeslice on the ``maxmin`` base: the max-min deficit, priority as its weight;
- ``fifo`` and ``pollux``: arrival (fifo never reads priority; pollux sizes every job at once).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jigsaw.model.domain import Job
from jigsaw.policies.allocator.config import JigsawConfig
from jigsaw.policies.allocator.objective import Objective
from jigsaw.policies.options import policy_options
from jigsaw.policies.shared.fairness import LasConfig, fair_shares, las_order, maxmin_order
from jigsaw.policies.timeslice import TimesliceConfig

Ranking = Callable[[Sequence[Job], float, int], list[Job]]
"""(every active job, now, the cluster's GPUs) -> the jobs, best-ranked first."""


@dataclass(frozen=True, slots=True)
class QueueOrder:
    words: str
    """How the policy orders waiting jobs, in words (the queue's note)."""
    rank: Ranking

    def waiting(self, active: Sequence[Job], now: float, gpus: int) -> list[Job]:
        """The waiting jobs among ``active``, in the order the policy takes them."""
        return [job for job in self.rank(active, now, gpus) if job.state.is_waiting]


def queue_order(policy: str, options: Mapping[str, Any]) -> QueueOrder:
    """The order of ``policy`` configured with (JSON) ``options``, as the server runs it."""
    try:
        built = policy_options(policy, dict(options))
    except (KeyError, ValueError):  # the server refuses such options at start; be safe
        built = {}
    if policy == "jigsaw":
        config = built.get("config")
        return _allocator(config if isinstance(config, JigsawConfig) else JigsawConfig())
    if policy == "timeslice":
        config = built.get("config")
        if not isinstance(config, TimesliceConfig):
            config = TimesliceConfig()
        if config.base == "maxmin":
            return _maxmin(policy)
        return _las(policy, config.las)
    if policy == "las":
        config = built.get("config")
        return _las(policy, config if isinstance(config, LasConfig) else LasConfig())
    if policy == "maxmin":
        return _maxmin(policy)
    return QueueOrder(f"{policy}: arrival order (priority is not used)", _arrival)


def _las(policy: str, config: LasConfig) -> QueueOrder:
    def rank(jobs: Sequence[Job], now: float, gpus: int) -> list[Job]:
        del gpus
        return las_order(jobs, now, config)

    return QueueOrder(
        f"{policy}: priority, then least attained service (a long-waiting job is promoted), "
        "then arrival",
        rank,
    )


def _allocator(config: JigsawConfig) -> QueueOrder:
    def rank(jobs: Sequence[Job], now: float, gpus: int) -> list[Job]:
        del gpus
        objective = Objective(config, now, per_node=1)

        def key(job: Job) -> tuple[bool, float, float, float]:
            starving = objective.starving(job)
            return (
                not starving,
                -objective.waited_s(job) if starving else 0.0,
                -objective.weight(job),
                job.submitted_at,
            )

        return sorted(jobs, key=key)

    return QueueOrder(
        "jigsaw: a job waiting past its promotion time first, then priority and least "
        "attained service (the allocator's weight), then arrival",
        rank,
    )


def _maxmin(policy: str) -> QueueOrder:
    def rank(jobs: Sequence[Job], now: float, gpus: int) -> list[Job]:
        return maxmin_order(jobs, now, fair_shares(jobs, gpus))

    return QueueOrder(
        f"{policy}: furthest behind its max-min fair share first (priority weighs the share)",
        rank,
    )


def _arrival(jobs: Sequence[Job], now: float, gpus: int) -> list[Job]:
    del now, gpus
    return sorted(jobs, key=lambda job: (job.submitted_at, job.id))
