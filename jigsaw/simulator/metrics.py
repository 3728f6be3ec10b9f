"""What a replay measures: JCTs, utilization, cluster efficiency (docs/SCHEDULER.md).

- ``utilization``: busy GPU-seconds / (GPUs x makespan); a GPU is busy while any gang is
  booked on it (starting, running or sharing).
- ``useful`` GPU-seconds: per job, iterations done / its reference rate (alone, full
  backprop, compact) x its gang size: the GPU time the work would take in the ideal case.
- ``cluster_efficiency``: useful GPU-seconds / GPU-seconds *wanted*, the integral over time of
  min(GPUs, sum of gang sizes of the jobs present). Idle GPUs that no job could use do not
  count against a policy; GPUs left idle while jobs wait do. Packing can push it above 1.
- ``busy_efficiency``: useful GPU-seconds / busy GPU-seconds (what each booked GPU-second
  delivered).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(slots=True)
class BusyTimeline:
    """Piecewise-constant number of busy GPUs, integrated as it changes."""

    points: list[tuple[float, int]] = field(default_factory=list)
    _area: float = 0.0
    _last_t: float = 0.0
    _last_busy: int = 0

    def change(self, at: float, busy: int) -> None:
        if at > self._last_t:
            self._area += self._last_busy * (at - self._last_t)
            self._last_t = at
        self._last_busy = busy
        if self.points and self.points[-1][0] == at:
            self.points[-1] = (at, busy)
        else:
            self.points.append((at, busy))

    def area_until(self, end: float) -> float:
        return self._area + self._last_busy * max(end - self._last_t, 0.0)

    def series(self, start: float, end: float, bins: int) -> list[tuple[float, float]]:
        """Mean busy GPUs in ``bins`` equal intervals of [start, end]: (bin start, mean)."""
        if end <= start or bins < 1:
            return []
        width = (end - start) / bins
        sums = [0.0] * bins
        points = [*self.points, (end, 0)]
        for (t0, busy), (t1, _) in itertools.pairwise(points):
            a, b = max(t0, start), min(t1, end)
            while a < b:
                index = min(int((a - start) / width), bins - 1)
                edge = min(start + (index + 1) * width, b)
                sums[index] += busy * (edge - a)
                a = edge if edge > a else b
        return [(start + i * width, s / width) for i, s in enumerate(sums)]


def wanted_gpu_seconds(intervals: Sequence[tuple[float, float, int]], num_gpus: int) -> float:
    """Integral of min(num_gpus, sum of gang sizes of jobs present) over time."""
    changes: list[tuple[float, int]] = []
    for submitted, finished, workers in intervals:
        changes.append((submitted, workers))
        changes.append((finished, -workers))
    changes.sort()
    area, demand, last = 0.0, 0, None
    for at, delta in changes:
        if last is not None and at > last:
            area += min(demand, num_gpus) * (at - last)
        demand += delta
        last = at
    return area


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(math.ceil(q / 100.0 * len(ordered)), 1)
    return ordered[min(rank, len(ordered)) - 1]
