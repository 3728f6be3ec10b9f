"""Tiresias-style discretized 2D least-attained-service, gang-scheduled with preemption.

Each round ranks every active job by (priority, LAS queue, arrival): a higher-priority job
always outranks a lower-priority one, so preemption falls on lower priorities first. The LAS
queue of a job is how many attained-service thresholds (GPU-seconds) it has passed; a job
waiting for long is promoted back to queue 0 (``LasConfig``). :func:`gang_round` turns the
ranking into starts and preemptions; each preemption names its preemptor. The kept path
(:func:`~jigsaw.policies.speed.kept_gang_round.kept_gang_round` on state kept across rounds)
decides the same for less work; ``incremental=False`` ranks and walks afresh each round.
"""

from __future__ import annotations

from jigsaw.model.decisions import Decision
from jigsaw.model.snapshot import Snapshot
from jigsaw.planning.planner import Planner
from jigsaw.policies.base import PolicyBase, register
from jigsaw.policies.shared.fairness import LasConfig
from jigsaw.policies.shared.gang import DEFAULT_MIN_RUN_S, gang_round, protection_ends
from jigsaw.policies.speed.kept_gang_round import kept_gang_round
from jigsaw.policies.speed.round_memory import RoundMemory


class LasPolicy(PolicyBase):
    name = "las"
    periodic = True

    def __init__(
        self,
        planner: Planner,
        *,
        config: LasConfig | None = None,
        min_run_s: float = DEFAULT_MIN_RUN_S,
        reserve: bool = True,
        incremental: bool = True,
    ) -> None:
        self.planner = planner
        self.config = config if config is not None else LasConfig()
        self.min_run_s = min_run_s
        self.reserve = reserve
        """Hold GPUs for the best-ranked blocked gang (off: free backfill, as Tiresias)."""
        self.memory = RoundMemory(incremental=incremental)
        """What makes a round cheap without changing it
        (:mod:`~jigsaw.policies.speed.round_memory`)."""

    def decide(self, snapshot: Snapshot) -> list[Decision]:
        if not snapshot.waiting:
            return []
        if self.memory.incremental:
            kept = self.memory.las_round(snapshot, self.config)
            return kept_gang_round(
                snapshot,
                kept.ranking,
                kept.gangs,
                planner=self.planner,
                min_run_s=self.min_run_s,
                label="las",
                reserve=self.reserve,
            )
        jobs = snapshot.running + snapshot.waiting
        ranked = self.memory.las_order(jobs, snapshot.now, self.config)
        return gang_round(
            snapshot,
            ranked,
            planner=self.planner,
            min_run_s=self.min_run_s,
            label="las",
            reserve=self.reserve,
        )

    def stable_until(self, snapshot: Snapshot) -> float:
        """Until a LAS key or a gang's protection changes, or a back-off ends, the ranking
        and so the round's decisions stay as they are (see :meth:`Policy.stable_until`)."""
        if not self.memory.incremental:
            return stable_ranking_until(snapshot, self.memory, self.config, self.min_run_s)
        kept = self.memory.las_round(snapshot, self.config)
        return _stable_until(snapshot, kept.ranking.soonest_change(snapshot.now), self.min_run_s)


def stable_ranking_until(
    snapshot: Snapshot, memory: RoundMemory, config: LasConfig, min_run_s: float
) -> float:
    jobs = snapshot.running + snapshot.waiting
    return _stable_until(snapshot, memory.las_stable_until(jobs, snapshot.now, config), min_run_s)


def _stable_until(snapshot: Snapshot, keys_change: float, min_run_s: float) -> float:
    """The first of: a LAS key changing (``keys_change``), a gang's protection ending, a
    back-off ending."""
    return min(
        keys_change,
        protection_ends(snapshot.running, snapshot.now, min_run_s),
        snapshot.next_retry_at if snapshot.next_retry_at is not None else float("inf"),
    )


register("las", uses=frozenset({"planner"}))(LasPolicy)
