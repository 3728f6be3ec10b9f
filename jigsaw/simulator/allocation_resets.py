"""Gavel's allocation resets: when a newly arrived job becomes schedulable.

Gavel's simulator (``Scheduler._update_priorities``) recomputes its allocation only at a
*reset*: at a round where jobs arrived or finished since the last reset, and at least
``minimum_time_between_allocation_resets`` (1,920 s) after it. Until then a newcomer has no
allocation and is not scheduled, and FIFO's allocation (the jobs it let run) does not change,
so a finished job's GPUs stay idle. Two details of Gavel's code are kept as they are: its
reset clock starts at 0, and a reset at time 0 leaves it at 0, so the next change resets again
at once; and when every job has arrived and nothing runs, it forces the next reset.

The replay holds arrivals here and releases them at a reset (``ReplayOptions.allocation_reset_s``).
A policy that keeps Gavel's allocation itself (fifo and maxmin with ``ranking="gavel"``) runs
the same clock (its state kept by the cycle's ``end_round`` step, never while it decides), and
is told of the one event it cannot see: that every job has arrived.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from jigsaw.simulator.workload import Arrival


@runtime_checkable
class FollowsAllocationResets(Protocol):
    def restart_reset_clock(self) -> None:
        """Nothing runs and every job has arrived: reset at the next change, however soon."""
        ...


@dataclass(slots=True)
class AllocationResets:
    interval_s: float
    last_reset: float = 0.0
    changed: bool = False
    """Jobs arrived or finished since the last reset (Gavel's ``need_to_update_allocation``)."""
    held: list[Arrival] = field(default_factory=list)

    def hold(self, arrival: Arrival) -> None:
        self.held.append(arrival)
        self.changed = True

    def due(self, now: float, *, idle_and_all_arrived: bool) -> bool:
        """Whether the round at ``now`` resets the allocation (and then marks it done)."""
        if idle_and_all_arrived:
            self.last_reset = 0.0
        if not self.changed:
            return False
        if self.last_reset != 0.0 and now - self.last_reset < self.interval_s:
            return False
        self.last_reset = now
        self.changed = False
        return True

    def release(self) -> list[Arrival]:
        released, self.held = self.held, []
        return released
