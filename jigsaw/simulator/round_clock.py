"""When the replay's next scheduling round starts.

Two kinds of round (:class:`~jigsaw.simulator.replay.ReplayOptions`):

- **On the grid** (the default, and Pollux's interval with ``rounds_on_grid_only``): rounds sit
  at multiples of ``round_s``. Without ``grid_only``, a round that no job needed is not held:
  the next arrival or finish after it is decided at once, and the grid resumes after that.
- **Gavel's** (``rounds_end_when_idle``): a round ends when the last gang running in it stops
  and the next one starts then; rounds are ``round_s`` apart only while gangs run.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from jigsaw.model.numerics import INTEGER_EPS, TIME_EPS_S


@dataclass(slots=True)
class RoundClock:
    round_s: float
    ends_when_idle: bool
    grid_only: bool
    next_round: float
    """When the next round starts (seconds of virtual time)."""

    @classmethod
    def starting_at(
        cls, now: float, round_s: float, *, ends_when_idle: bool, grid_only: bool
    ) -> RoundClock:
        clock = cls(round_s, ends_when_idle, grid_only, now)
        if grid_only:
            clock.next_round = clock.at_or_after(now)
        return clock

    def at_or_after(self, moment: float) -> float:
        """The first round boundary (a multiple of the round length) at or after ``moment``."""
        return math.ceil(moment / self.round_s - INTEGER_EPS) * self.round_s

    def after_quiet(self, quiet_until: float) -> float:
        """The first round a policy's quiet spell (``stable_until``) leaves to be decided."""
        return max(self.next_round, self.at_or_after(quiet_until))

    def skip_to(self, now: float) -> None:
        """The rounds skipped as quiet happened, deciding nothing: the clock moves past them."""
        self.next_round = max(self.next_round, self.at_or_after(now))

    def reached(self, now: float, cluster_idle: Callable[[], bool]) -> bool:
        """Whether a round starts at ``now``; if it does, the one after it is scheduled.
        ``cluster_idle`` (no gang runs) is asked only for Gavel's rounds."""
        if self.ends_when_idle and now + TIME_EPS_S < self.next_round and cluster_idle():
            self.next_round = now  # the round's last gang stopped: the next round starts now
        elif self.grid_only and self.next_round < now - TIME_EPS_S:
            self.next_round = self.at_or_after(now)
        if now + TIME_EPS_S < self.next_round:
            return False
        if self.ends_when_idle:
            self.next_round = now + self.round_s
        else:
            self.next_round = (math.floor(now / self.round_s + INTEGER_EPS) + 1) * self.round_s
        return True
