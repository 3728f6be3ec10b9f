"""The order the configured policy takes waiting jobs in: what ``queue`` shows and what its
estimates replay (``squeue`` sorts by Slurm's priority the same way).

Each policy ranks its own way; this module asks the same ranking functions the policies use,
with the server's policy options, and never a ranking of its own:

- ``las``, ``jigsaw`` and ``timeslice`` (on their default ``las`` base): priority, then the
  Tiresias queue of attained service (a starving job is promoted), then arrival;
- ``maxmin`` and jigsaw on the ``maxmin`` base: the max-min deficit, priority as its weight;
- ``fifo`` and ``pollux``: arrival (fifo never reads priority; pollux sizes every job at once).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jigsaw.model.domain import Job
from jigsaw.policies.jigsaw import JigsawConfig
from jigsaw.policies.options import policy_options
from jigsaw.policies.shared.fairness import LasConfig, fair_shares, las_order, maxmin_order

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
    if policy in ("jigsaw", "timeslice"):
        config = built.get("config")
        if not isinstance(config, JigsawConfig):
            config = JigsawConfig()
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
