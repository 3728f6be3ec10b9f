"""Where the trace's arrivals enter the replay, in time order.

An arrival enters at its time, unless Gavel's allocation resets hold it
(:mod:`jigsaw.simulator.allocation_resets`): then it waits for the next reset, which a round
opens. Entering means what the replay says (``enter``): submitted to the store, or queued for
an arrival-order policy that needs only a prefix of the queue.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from jigsaw.simulator.allocation_resets import AllocationResets
from jigsaw.simulator.workload import Arrival


class ArrivalGate:
    def __init__(
        self,
        arrivals: Sequence[Arrival],
        resets: AllocationResets | None,
        enter: Callable[[Arrival], None],
    ) -> None:
        self._pending = list(reversed(arrivals))
        """Not yet arrived, the next one last."""
        self._resets = resets
        self._enter = enter

    def next_at(self) -> float | None:
        """When the next arrival comes (``None``: every job has arrived)."""
        return self._pending[-1].at if self._pending else None

    @property
    def all_arrived(self) -> bool:
        return not self._pending

    @property
    def resets_allocations(self) -> bool:
        """Gavel's allocation resets gate the arrivals."""
        return self._resets is not None

    @property
    def holding(self) -> bool:
        """Arrived jobs wait for an allocation reset."""
        return self._resets is not None and bool(self._resets.held)

    def admit_until(self, now: float, *, newcomers_blocked: bool) -> tuple[bool, bool]:
        """Let in every arrival due by ``now``. Returns (any arrived, a decision may change):
        behind a waiting job an arrival-order policy cannot start a newcomer
        (``newcomers_blocked``), while a held arrival always changes the allocation."""
        arrived = changes = False
        while self._pending and self._pending[-1].at <= now:
            arrived = True
            changes = changes or not newcomers_blocked
            if self._resets is not None:
                self._resets.hold(self._pending.pop())
                changes = True
            else:
                self._enter(self._pending.pop())
        return arrived, changes

    def note_finishes(self) -> None:
        """A job finished: the allocation changes at the next reset."""
        if self._resets is not None:
            self._resets.changed = True

    def opens_round(
        self, now: float, *, idle_and_all_arrived: bool, decides_between_resets: bool
    ) -> bool:
        """Whether a round at ``now`` goes on to the policy. With allocation resets, a reset
        due now lets the held arrivals in; a policy that does not decide in rounds (fifo)
        changes its allocation only at a reset."""
        if self._resets is None:
            return True
        if self._resets.due(now, idle_and_all_arrived=idle_and_all_arrived):
            for arrival in self._resets.release():
                self._enter(arrival)
            return True
        return decides_between_resets
