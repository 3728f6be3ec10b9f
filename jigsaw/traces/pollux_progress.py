"""A Pollux job's work at a batch other than the one it was counted at.

A Pollux job's ``iterations`` are counted at its initial global batch ``B0``
(:meth:`jigsaw.traces.pollux_apps.PolluxApp.iterations`): epoch ``e`` needs ``w_e / g_e(B0)``
of them, ``w_e`` being the progress the epoch needs and ``g_e(B)`` the progress one iteration
at batch ``B`` makes during it (:func:`jigsaw.traces.pollux_curves.gain`, with the epoch's
``grad_sqr`` and ``grad_var`` at ``B``). Run at another batch ``B``, one iteration there is
worth ``g_e(B) / g_e(B0)`` of those counted iterations, which changes from epoch to epoch.

:class:`JobWork` maps a job's iterations done to its epoch and says how long the rest takes
when progress costs so many seconds per unit in each epoch (at a fixed batch, or at the
cheapest batch of each epoch for a job that re-chooses its batch): the exact time to the end
while nothing changes, which is what a simulated gang needs (it runs at a constant rate until
it is re-rated).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from jigsaw.traces.pollux_curves import AppCurves, gain


@dataclass(slots=True)
class JobWork:
    curves: AppCurves
    initial_batch: float
    """``B0``: the global batch the job's iterations are counted at."""
    iterations: float | None = None
    """The job's iterations, when rounded from the curves' exact count: every epoch's share
    is stretched alike so that the epochs end exactly there (the executor's unit)."""
    per_epoch: list[float] = field(init=False)
    """Iterations at ``B0`` each epoch needs."""
    ends: list[float] = field(init=False)
    """Iterations at ``B0`` done when each epoch ends (cumulative ``per_epoch``)."""
    progress_per_iteration: list[float] = field(init=False)
    """Units of progress one of those iterations makes in each epoch (``g_e(B0)``, or a
    little less when stretched)."""
    _gains: dict[float, list[float]] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        needed = [
            self.curves.epoch_progress(e + 1) - self.curves.epoch_progress(e)
            for e in range(self.curves.epochs)
        ]
        exact = [n / g for n, g in zip(needed, self.gains(self.initial_batch), strict=True)]
        stretch = 1.0 if self.iterations is None else self.iterations / sum(exact)
        self.per_epoch = [count * stretch for count in exact]
        self.progress_per_iteration = [
            n / count for n, count in zip(needed, self.per_epoch, strict=True)
        ]
        self.ends = []
        total = 0.0
        for count in self.per_epoch:
            total += count
            self.ends.append(total)

    @property
    def total(self) -> float:
        return self.ends[-1] if self.ends else 0.0

    def epoch_at(self, done: float) -> int:
        """The epoch (0-based) a job that has done ``done`` iterations is in."""
        return min(bisect.bisect_right(self.ends, done), len(self.ends) - 1)

    def gains(self, batch: float) -> list[float]:
        """``g_e(batch)`` for every epoch (the batch clamped to the validated range)."""
        clamped = min(max(batch, self.curves.init_batch_size), self.curves.max_batch_size)
        cached = self._gains.get(clamped)
        if cached is None:
            scale = clamped / self.curves.init_batch_size
            cached = self._gains[clamped] = [
                gain(*self.curves.grad_stats(clamped, e), scale) for e in range(self.curves.epochs)
            ]
        return cached

    def costs_at(self, batch: float, iteration_s: float) -> list[float]:
        """Seconds per unit of progress in each epoch at a fixed ``batch``."""
        return [iteration_s / g for g in self.gains(batch)]

    def seconds_left(self, done: float, costs: Sequence[float]) -> float:
        """Seconds to finish from ``done`` iterations when progress in epoch ``e`` costs
        ``costs[e]`` seconds per unit (:meth:`costs_at`, or the cheapest batch per epoch)."""
        return self._milestones(done, costs)[0][-1]

    def progress_curve(self, done: float, costs: Sequence[float]) -> Callable[[float], float]:
        """The share of the work left at ``done`` that is done after a share of
        :meth:`seconds_left`: a straight line within each epoch (its rate is constant there),
        bent at epoch ends."""
        times, dones = self._milestones(done, costs)
        horizon, left = times[-1], self.total - done

        def share_done(share: float) -> float:
            if horizon <= 0 or left <= 0 or share >= 1.0:
                return 1.0
            moment = max(share, 0.0) * horizon
            i = max(bisect.bisect_left(times, moment), 1)
            t0, t1, d0, d1 = times[i - 1], times[i], dones[i - 1], dones[i]
            reached = d1 if t1 <= t0 else d0 + (d1 - d0) * (moment - t0) / (t1 - t0)
            return (reached - done) / left

        return share_done

    def _milestones(self, done: float, costs: Sequence[float]) -> tuple[list[float], list[float]]:
        """(seconds from now, iterations done) at now and at the end of every epoch left."""
        times, dones = [0.0], [done]
        if done >= self.total:
            return times, dones
        seconds = 0.0
        for e in range(self.epoch_at(done), len(self.ends)):
            start = max(done, self.ends[e] - self.per_epoch[e])
            seconds += (self.ends[e] - start) * self.progress_per_iteration[e] * costs[e]
            times.append(seconds)
            dones.append(self.ends[e])
        return times, dones
