"""Clocks: wall time for the service, virtual time for the simulator."""

from __future__ import annotations

import time


class WallClock:
    def now(self) -> float:
        return time.time()


class VirtualClock:
    """Time moves only when the simulator says so, and never backwards."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    def advance_to(self, moment: float) -> None:
        if moment < self._now:
            raise ValueError(f"virtual time cannot go back from {self._now} to {moment}")
        self._now = moment
