"""Agreement among the ranks of a gang on "stop now" and "switch to plan version v".

The driver's requests reach each rank's actor at slightly different moments, while the ranks
keep training. To act on them at the *same* iteration, ranks meet at control points (the
first iteration of a lease and every ``control_every``-th iteration, numbers every rank
shares) and all-reduce a two-element vector with MAX:

- ``stop``: 1 if this rank has been asked to stop. Any rank asked means all stop.
- ``-version``: the newest plan version this rank holds, negated, so MAX yields the *oldest*
  newest version, i.e. the newest version that *every* rank holds. Each rank keeps every
  offered version, so all can install it.

That is one tiny collective every ``control_every`` iterations, and no race: a request that
arrives after a rank passed a control point is seen at the next one by everyone.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from worker.runtime.messages import PlanOffer

ReduceMax = Callable[[list[int]], list[int]]
"""All-reduce with MAX over the gang's ranks (``torch.distributed`` in the actor)."""


@dataclass(frozen=True, slots=True)
class Agreement:
    stop: bool
    plan: PlanOffer | None
    """The plan to install now, when a newer version than the current one is held by all."""


class ControlChannel:
    """One per rank. ``request_stop`` and ``offer`` are called from the actor's control thread
    while the training thread calls ``agree`` at control points."""

    def __init__(self, current: PlanOffer) -> None:
        self._lock = threading.Lock()
        self._stop_requested = False
        self._offers: dict[int, PlanOffer] = {current.version: current}
        self.current = current

    def request_stop(self) -> None:
        with self._lock:
            self._stop_requested = True

    def offer(self, plan: PlanOffer) -> None:
        with self._lock:
            self._offers.setdefault(plan.version, plan)

    def agree(self, reduce_max: ReduceMax) -> Agreement:
        with self._lock:
            stop = 1 if self._stop_requested else 0
            newest = max(self._offers)
        stop_any, negated = reduce_max([stop, -newest])
        common = -negated
        plan: PlanOffer | None = None
        if common > self.current.version:
            with self._lock:
                plan = self._offers[common]
                # Versions older than the installed one can never be agreed on again.
                self._offers = {v: p for v, p in self._offers.items() if v >= common}
            self.current = plan
        return Agreement(stop=stop_any > 0, plan=plan)


def is_control_point(iteration: int, lease_start: int, every: int) -> bool:
    return iteration == lease_start or iteration % every == 0
