"""FIFO with gangs and no preemption: start jobs in arrival order while the head fits.

Strict FIFO (no backfilling), as in Gavel's and Tiresias' baselines: a large gang at the head
blocks the jobs behind it. A gang larger than the cluster's alive GPUs (a node was lost) is
skipped, not waited for: it could never start (the service marks it, api/unschedulable.py).
Every worker gets a GPU of its own; plans are resolved from the
job's own spec (``auto`` means full backprop here: FIFO is not SPB-aware).

``ranking="gavel"`` (Gavel's semantics, chosen for Gavel traces) runs FIFO as Gavel's own
simulator does instead, round by round (:mod:`jigsaw.policies.shared.gavel_fifo`).
"""

from __future__ import annotations

from jigsaw.model.decisions import Decision, Start
from jigsaw.model.snapshot import Snapshot
from jigsaw.planning.planner import Planner
from jigsaw.policies.base import PolicyBase, register
from jigsaw.policies.shared.gavel_fifo import gavel_fifo_allocation, gavel_fifo_round
from jigsaw.policies.shared.gavel_share import GavelPriorities
from jigsaw.policies.shared.placement import compact_placement, group_by_node, take


class FifoPolicy(PolicyBase):
    name = "fifo"
    serves_arrival_prefix = True
    """Decides from the oldest waiting jobs only, never more of them than there are free
    GPUs plus one: the simulator may hold the rest of the queue back (same decisions)."""

    def __init__(self, planner: Planner, *, ranking: str = "arrival") -> None:
        if ranking not in ("arrival", "gavel"):
            raise ValueError(f"ranking must be 'arrival' or 'gavel', got {ranking!r}")
        self.planner = planner
        self._gavel: GavelPriorities | None = None
        if ranking == "gavel":
            self._gavel = GavelPriorities(allocate=gavel_fifo_allocation)
            self.periodic = True  # Gavel time-slices an over-full FIFO allocation by rounds
            self.serves_arrival_prefix = False

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
        if self._gavel is not None:
            return gavel_fifo_round(snapshot, self._gavel, self.planner)
        free = group_by_node(snapshot.free_gpus())
        decisions: list[Decision] = []
        alive = snapshot.cluster.num_gpus
        for job in snapshot.waiting:
            if job.spec.workers > alive:
                continue  # can never fit the cluster as it is: it must not block the queue
            placement = compact_placement(free, job.spec.workers)
            if placement is None:
                break
            take(free, placement)
            decisions.append(
                Start(job.id, placement, self.planner.start_plan(job), "fifo: head fits")
            )
        return decisions


register("fifo", uses=frozenset({"planner"}))(FifoPolicy)
