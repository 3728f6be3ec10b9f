"""Statistical efficiency eta(plan): progress of one SPB iteration relative to full backprop.

Measurements come from ``jigsaw/data/efficiency.json``, written by the SPB engine's
convergence runs (schema in docs/ORACLE.md). Lookup for (model, plan), first match wins:

1. full backprop -> exactly 1.0;
2. an exact measurement of this model with these depths -> its ``eta_mean``;
3. other measurements, by plan *shape* (mean depth fraction, ``mean(d) / K``): the lower
   confidence bound ``eta_mean - eta_std`` of every measurement, made non-increasing in the
   shape and linearly interpolated from (0, 1.0); never above what was measured;
4. no measurements at all -> the conservative default ``eta = 1 - mean_depth_fraction``,
   which is the mean over blocks of the share of the batch whose gradient reaches that block
   (``|C_b| / N`` averaged over b). It assumes progress grows linearly with the samples
   behind each block's gradient, which over-states the loss: larger batches give
   sub-linear gains, so measured eta is usually higher.

Every estimate names its source.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.numerics import ROUNDOFF
from jigsaw.model.plan import SPBPlan
from jigsaw.model.profiles import canonical_name

FULL_BACKPROP = "full backprop"
MEASURED = "measured"
MEASURED_SHAPE = "measured plan shape (lower bound)"
CONSERVATIVE_DEFAULT = "conservative default"
MIN_ETA = 0.01


@dataclass(frozen=True, slots=True)
class EfficiencyMeasurement:
    model: str
    depths: tuple[int, ...]
    num_blocks: int
    eta_mean: float
    eta_std: float
    dataset: str = ""
    plan: str = ""
    metric: str = ""

    @property
    def mean_depth_fraction(self) -> float:
        return sum(self.depths) / (len(self.depths) * self.num_blocks)

    @property
    def lower_bound(self) -> float:
        return max(MIN_ETA, min(1.0, self.eta_mean - self.eta_std))


@dataclass(frozen=True, slots=True)
class EtaEstimate:
    eta: float
    source: str


def mean_depth_fraction(plan: SPBPlan) -> float:
    return sum(plan.depths) / (plan.num_workers * plan.num_blocks)


def conservative_default(plan: SPBPlan) -> float:
    return max(MIN_ETA, 1.0 - mean_depth_fraction(plan))


class EfficiencyTable:
    """Measured eta values with the conservative lookup described in the module docstring."""

    def __init__(
        self, measurements: Sequence[EfficiencyMeasurement] = (), *, origin: str = "none"
    ) -> None:
        self.measurements = tuple(measurements)
        self.origin = origin
        self._exact: dict[tuple[str, tuple[int, ...], int], list[float]] = {}
        for m in self.measurements:
            key = (canonical_name(m.model)[0], m.depths, m.num_blocks)
            self._exact.setdefault(key, []).append(m.eta_mean)
        self._shape_x, self._shape_y = _lower_envelope(self.measurements)
        self._cache: dict[tuple[str, tuple[int, ...], int], EtaEstimate] = {}

    @classmethod
    def load(cls, path: Path | None = None) -> EfficiencyTable:
        """Read ``efficiency.json`` (packaged one by default); an empty table if it is absent."""
        if path is not None:
            if not path.is_file():
                return cls(origin=f"{path} (absent: conservative default)")
            text, label = path.read_text(), str(path)
        else:
            entry = resources.files("jigsaw").joinpath("data/efficiency.json")
            if not entry.is_file():
                return cls(origin="jigsaw/data/efficiency.json (absent: conservative default)")
            text, label = entry.read_text(), "jigsaw/data/efficiency.json"
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise InvalidSpecError(f"{label}: not valid JSON ({error})") from None
        return cls(parse_measurements(data, label), origin=label)

    def lookup(self, model: str, plan: SPBPlan) -> EtaEstimate:
        key = (model, plan.depths, plan.num_blocks)
        estimate = self._cache.get(key)
        if estimate is None:
            estimate = self._lookup(canonical_name(model)[0], plan)
            self._cache[key] = estimate
        return estimate

    def eta(self, model: str, plan: SPBPlan) -> float:
        return self.lookup(model, plan).eta

    def _lookup(self, model: str, plan: SPBPlan) -> EtaEstimate:
        if plan.is_full_backprop:
            return EtaEstimate(1.0, FULL_BACKPROP)
        exact = self._exact.get((model, plan.depths, plan.num_blocks))
        if exact:
            return EtaEstimate(min(1.0, sum(exact) / len(exact)), MEASURED)
        if self._shape_x:
            return EtaEstimate(self._interpolate(mean_depth_fraction(plan)), MEASURED_SHAPE)
        return EtaEstimate(conservative_default(plan), CONSERVATIVE_DEFAULT)

    def _interpolate(self, x: float) -> float:
        xs, ys = self._shape_x, self._shape_y
        if x >= xs[-1] - ROUNDOFF:
            # Beyond the deepest measured shape: hold the last bound, or the default if lower.
            return ys[-1] if x <= xs[-1] + ROUNDOFF else max(MIN_ETA, min(ys[-1], 1.0 - x))
        i = bisect.bisect_right(xs, x)
        x0, y0, x1, y1 = xs[i - 1], ys[i - 1], xs[i], ys[i]
        return y0 + (y1 - y0) * (x - x0) / (x1 - x0) if x1 > x0 else min(y0, y1)


def _lower_envelope(
    measurements: Sequence[EfficiencyMeasurement],
) -> tuple[list[float], list[float]]:
    """Points (shape, bound), anchored at (0, 1), non-increasing in shape."""
    if not measurements:
        return [], []
    lowest: dict[float, float] = {0.0: 1.0}
    for m in measurements:
        x = round(m.mean_depth_fraction, 9)
        lowest[x] = min(lowest.get(x, 1.0), m.lower_bound)
    xs = sorted(lowest)
    ys: list[float] = []
    for x in xs:
        ys.append(min(lowest[x], ys[-1]) if ys else lowest[x])
    return xs, ys


def parse_measurements(data: Any, label: str) -> list[EfficiencyMeasurement]:
    if not isinstance(data, dict) or not isinstance(data.get("measurements"), list):
        raise InvalidSpecError(f"{label}: expected an object with a 'measurements' list")
    parsed = []
    for position, raw in enumerate(data["measurements"]):
        where = f"{label}: measurements[{position}]"
        if not isinstance(raw, dict):
            raise InvalidSpecError(f"{where} must be an object")
        try:
            depths = tuple(int(d) for d in raw["depths"])
            measurement = EfficiencyMeasurement(
                model=str(raw["model"]),
                depths=depths,
                num_blocks=int(raw["num_blocks"]),
                eta_mean=float(raw["eta_mean"]),
                eta_std=float(raw.get("eta_std") or 0.0),
                dataset=str(raw.get("dataset", "")),
                plan=str(raw.get("plan", "")),
                metric=str(raw.get("metric", "")),
            )
        except KeyError as missing:
            raise InvalidSpecError(f"{where} lacks {missing}") from None
        except (TypeError, ValueError) as error:
            raise InvalidSpecError(f"{where} has a malformed field: {error}") from None
        if not depths or measurement.num_blocks < 1 or max(depths) >= measurement.num_blocks:
            raise InvalidSpecError(f"{where}: depths must lie in 0..num_blocks-1")
        if not 0.0 < measurement.eta_mean or measurement.eta_std < 0.0:
            raise InvalidSpecError(f"{where}: eta_mean must be > 0 and eta_std >= 0")
        parsed.append(measurement)
    return parsed
