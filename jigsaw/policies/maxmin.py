"""Gavel-style max-min fairness over GPU time, gang-scheduled in rounds with preemption.

Each round computes every active job's max-min fair share of GPU time (weighted by
priority; ``fair_shares``), then ranks jobs by how far they are behind that share since they
arrived, normalised by gang size: the most-owed job runs first. This is the round-based
mechanism of Gavel (Narayanan et al., OSDI 2020) on a homogeneous cluster, where its LP
reduces to water-filling. :func:`gang_round` applies the ranking. A gang keeps its GPUs for
at least ``min_run_s`` (``DEFAULT_MIN_RUN_S``, as every preemptive policy here) even when
rounds are shorter, or time-slicing would spend most of the time checkpointing.

``ranking="gavel"`` (Gavel's semantics, chosen for Gavel traces) ranks as Gavel's own
simulator does instead: an allocation held between allocation resets and a priority from
each job's run time since the last reset (:mod:`jigsaw.policies.shared.gavel_share`). That ranking
keeps state between rounds, so one policy instance serves one cluster; ``decide`` only reads
it, and the cycle's ``end_round`` step keeps it.
"""

from __future__ import annotations

from jigsaw.model.decisions import Decision
from jigsaw.model.snapshot import Snapshot
from jigsaw.planning.planner import Planner
from jigsaw.policies.base import PolicyBase, register
from jigsaw.policies.shared.fairness import fair_shares, maxmin_order
from jigsaw.policies.shared.gang import DEFAULT_MIN_RUN_S, gang_round
from jigsaw.policies.shared.gavel_share import (
    GAVEL_HEAD_START_S,
    GAVEL_RESET_INTERVAL_S,
    GavelPriorities,
)


class MaxMinPolicy(PolicyBase):
    name = "maxmin"
    periodic = True

    def __init__(
        self,
        planner: Planner,
        *,
        min_run_s: float = DEFAULT_MIN_RUN_S,
        reserve: bool = True,
        ranking: str = "deficit",
        reset_interval_s: float = GAVEL_RESET_INTERVAL_S,
        head_start_s: float = GAVEL_HEAD_START_S,
    ) -> None:
        if ranking not in ("deficit", "gavel"):
            raise ValueError(f"ranking must be 'deficit' or 'gavel', got {ranking!r}")
        self.ranking = ranking
        """``deficit``: most owed since arrival first; ``gavel``: Gavel's priority
        (:mod:`jigsaw.policies.shared.gavel_share`)."""
        self._gavel: GavelPriorities | None = None
        """Gavel's allocation and time counters, kept between its allocation resets."""
        if ranking == "gavel":
            self._gavel = GavelPriorities(
                reset_interval_s=reset_interval_s, head_start_s=head_start_s
            )
        self.planner = planner
        self.min_run_s = min_run_s
        self.reserve = reserve
        """Hold GPUs for the best-ranked blocked gang (off: greedy fill, as Gavel)."""

    def restart_reset_clock(self) -> None:
        """The replay's signal under Gavel's semantics (jigsaw/simulator/allocation_resets.py)."""
        if self._gavel is not None:
            self._gavel.restart_reset_clock()

    def end_round(self, snapshot: Snapshot) -> None:
        """Keep Gavel's allocation and counters as the round left them (a reset, if due)."""
        if self._gavel is not None:
            jobs = snapshot.running + snapshot.waiting
            self._gavel.end_round(jobs, snapshot.now, len(snapshot.cluster.gpu_ids()))

    def decide(self, snapshot: Snapshot) -> list[Decision]:
        jobs = snapshot.running + snapshot.waiting
        capacity = len(snapshot.cluster.gpu_ids())
        if not snapshot.waiting:
            return []  # Gavel's resets in such rounds too are end_round's
        if self._gavel is not None:
            ranked = self._gavel.order(jobs, snapshot.now, capacity)
        else:
            ranked = maxmin_order(jobs, snapshot.now, fair_shares(jobs, capacity))
        return gang_round(
            snapshot,
            ranked,
            planner=self.planner,
            min_run_s=self.min_run_s,
            label="maxmin",
            reserve=self.reserve,
        )


register("maxmin", uses=frozenset({"planner"}))(MaxMinPolicy)
