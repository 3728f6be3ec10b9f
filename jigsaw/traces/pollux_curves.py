"""Pollux's validation curves: how each application's gradient noise evolves over training.

``pollux/apps/<app>/validation-<B>.csv`` is one training run at global batch ``B``, logged
about once per epoch, with columns ``progress,iteration,metric,grad_sqr,grad_var``. Row ``e``
(0-based) holds the state after epoch ``e + 1``; ``grad_sqr`` and ``grad_var`` are Pollux's
estimates of |true gradient|^2 and of the per-sample gradient variance during that epoch.

What a caller gets, per application (:class:`AppCurves`):

- :meth:`AppCurves.noise_curve`: the (progress, grad_sqr, grad_var) curve over training at a
  batch size (linear interpolation between the two measured batch sizes around it, as
  Pollux's simulator does);
- :meth:`AppCurves.grad_stats` at an epoch, :meth:`AppCurves.epoch_progress` (where epoch
  ``e`` ends, in progress units: the smallest ``progress`` any run logged at that row);
- :func:`statistical_efficiency`: Pollux's ``E = (var + sqr) / (var / s + sqr) / s``.

``progress`` counts iterations at the application's initial (smallest measured) batch size
times statistical efficiency: one iteration at batch ``M`` advances it by
``s E(M) = (var + sqr) / (var / s + sqr)`` with ``s = M / M0`` (Pollux, OSDI 2021, section 3.1).
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from jigsaw.model.errors import TraceFormatError

COLUMNS = ("progress", "iteration", "metric", "grad_sqr", "grad_var")
_FILE = re.compile(r"^validation-(?P<batch>\d+)\.csv$")

POLLUX_EPOCHS: dict[str, int] = {
    "bert": 2,
    "cifar10": 100,
    "deepspeech2": 80,
    "imagenet": 90,
    "ncf": 10,
    "yolov3": 50,
}
"""Epochs after which Pollux's simulator ends a job of each application (its
``applications.py``; docs/SCHEDULER.md, "Pollux workloads")."""


@dataclass(frozen=True, slots=True)
class CurvePoint:
    progress: float
    iteration: int
    metric: float
    grad_sqr: float
    grad_var: float


@dataclass(frozen=True, slots=True)
class ValidationCurve:
    """One ``validation-<B>.csv``: a run at global batch ``batch_size``."""

    batch_size: int
    points: tuple[CurvePoint, ...]
    source: str


def statistical_efficiency(grad_sqr: float, grad_var: float, scale: float) -> float:
    """Pollux's efficiency of a batch ``scale`` times the initial one, in (0, 1]."""
    if scale <= 0:
        raise ValueError("scale must be positive")
    return gain(grad_sqr, grad_var, scale) / scale


def gain(grad_sqr: float, grad_var: float, scale: float) -> float:
    """Progress one iteration at ``scale`` x the initial batch makes, in initial iterations."""
    denominator = grad_var / scale + grad_sqr
    if denominator <= 0:
        return 1.0
    return (grad_var + grad_sqr) / denominator


def read_validation(path: str | Path) -> ValidationCurve:
    """One validation file; a missing column or a bad number names the file and line."""
    label = str(path)
    match = _FILE.match(Path(path).name)
    if match is None:
        raise TraceFormatError(label, 0, "a validation file is named validation-<batch>.csv")
    points: list[CurvePoint] = []
    with Path(path).open(newline="") as handle:
        reader = csv.reader(handle)
        header = [h.strip() for h in next(reader, [])]
        missing = [c for c in COLUMNS if c not in header]
        if missing:
            raise TraceFormatError(
                label, 1, f"missing column(s) {', '.join(missing)}; expected {','.join(COLUMNS)}"
            )
        index = {name: header.index(name) for name in COLUMNS}
        for line, fields in enumerate(reader, start=2):
            if not fields:
                continue
            if len(fields) != len(header):
                raise TraceFormatError(
                    label, line, f"expected {len(header)} fields, found {len(fields)}"
                )
            values = [_number(fields[index[name]], name, label, line) for name in COLUMNS]
            if values[3] < 0 or values[4] < 0:
                raise TraceFormatError(label, line, "grad_sqr and grad_var must be >= 0")
            points.append(CurvePoint(values[0], int(values[1]), values[2], values[3], values[4]))
    if not points:
        raise TraceFormatError(label, 2, "no rows")
    return ValidationCurve(int(match.group("batch")), tuple(points), label)


@dataclass(frozen=True, slots=True)
class AppCurves:
    """Every validation run of one application, sorted by batch size."""

    app: str
    curves: tuple[ValidationCurve, ...]
    epochs: int

    @property
    def init_batch_size(self) -> int:
        return self.curves[0].batch_size

    @property
    def max_batch_size(self) -> int:
        return self.curves[-1].batch_size

    def epoch_progress(self, epoch: int) -> float:
        """Progress at which epoch ``epoch`` (1-based count of epochs done) is complete."""
        if epoch <= 0:
            return 0.0
        return min(curve.points[epoch - 1].progress for curve in self.curves)

    def grad_stats(self, batch_size: float, epoch: int) -> tuple[float, float]:
        """(grad_sqr, grad_var) during epoch ``epoch`` (0-based) at a global batch size."""
        lower, upper, weight = self._bracket(batch_size)
        low, high = lower.points[epoch], upper.points[epoch]
        return (
            low.grad_sqr + weight * (high.grad_sqr - low.grad_sqr),
            low.grad_var + weight * (high.grad_var - low.grad_var),
        )

    def noise_curve(self, batch_size: float) -> list[tuple[float, float, float]]:
        """(progress at the end of the epoch, grad_sqr, grad_var) for every epoch."""
        return [
            (self.epoch_progress(epoch + 1), *self.grad_stats(batch_size, epoch))
            for epoch in range(self.epochs)
        ]

    def iterations_to_finish(self, batch_size: float) -> float:
        """Iterations at a fixed global batch to complete every epoch: the sum over epochs of
        (progress the epoch needs) / (progress one iteration makes)."""
        scale = batch_size / self.init_batch_size
        total = 0.0
        for epoch in range(self.epochs):
            grad_sqr, grad_var = self.grad_stats(batch_size, epoch)
            needed = self.epoch_progress(epoch + 1) - self.epoch_progress(epoch)
            total += needed / gain(grad_sqr, grad_var, scale)
        return total

    def _bracket(self, batch_size: float) -> tuple[ValidationCurve, ValidationCurve, float]:
        if not self.init_batch_size <= batch_size <= self.max_batch_size:
            raise ValueError(
                f"{self.app}: batch size {batch_size:g} is outside the measured range "
                f"{self.init_batch_size}..{self.max_batch_size}"
            )
        lower = self.curves[0]
        for curve in self.curves:
            if curve.batch_size <= batch_size:
                lower = curve
            if curve.batch_size >= batch_size:
                if curve.batch_size == lower.batch_size:
                    return lower, curve, 0.0
                weight = (batch_size - lower.batch_size) / (curve.batch_size - lower.batch_size)
                return lower, curve, weight
        return lower, lower, 0.0


def load_app_curves(app_dir: str | Path, epochs: int | None = None) -> AppCurves:
    """Every ``validation-*.csv`` of one application directory."""
    directory = Path(app_dir)
    app = directory.name
    files = sorted(p for p in directory.glob("validation-*.csv") if _FILE.match(p.name))
    if not files:
        raise TraceFormatError(str(directory), 0, f"no validation-<batch>.csv files for {app}")
    curves = tuple(sorted((read_validation(p) for p in files), key=lambda c: c.batch_size))
    shortest = min(len(c.points) for c in curves)
    wanted = epochs if epochs is not None else POLLUX_EPOCHS.get(app, shortest)
    if wanted > shortest:
        short = min(curves, key=lambda c: len(c.points))
        raise TraceFormatError(
            short.source,
            len(short.points) + 1,
            f"{app} needs {wanted} epochs of curve but this file has {len(short.points)} rows",
        )
    return AppCurves(app, curves, wanted)


def _number(text: str, what: str, label: str, line: int) -> float:
    try:
        value = float(text)
    except ValueError:
        raise TraceFormatError(label, line, f"{what} must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise TraceFormatError(label, line, f"{what} must be finite, got {text!r}")
    return value


def has_curves(apps_dir: Path, app: str) -> bool:
    directory = apps_dir / app
    return directory.is_dir() and any(
        _FILE.match(p.name) for p in directory.glob("validation-*.csv")
    )


__all__: Sequence[str] = (
    "POLLUX_EPOCHS",
    "AppCurves",
    "CurvePoint",
    "ValidationCurve",
    "gain",
    "has_curves",
    "load_app_curves",
    "read_validation",
    "statistical_efficiency",
)
