"""The record every trace reader yields, and small parsing helpers shared by the readers."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from jigsaw.model.errors import TraceFormatError


@dataclass(frozen=True, slots=True)
class Elasticity:
    """How a trace's job may be resized (the JobSpec fields of the same names)."""

    min_workers: int
    max_workers: int
    batch_policy: str = "fixed"
    min_global_batch: int | None = None
    max_global_batch: int | None = None

    def spec_fields(self) -> dict[str, Any]:
        return {
            "min_workers": self.min_workers,
            "max_workers": self.max_workers,
            "batch_policy": self.batch_policy,
            "min_global_batch": self.min_global_batch,
            "max_global_batch": self.max_global_batch,
        }


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One job of a workload trace, normalised across trace formats.

    ``submit_time_s`` is seconds from the start of the trace (the first job in the selected
    window submits at 0 for Philly). ``batch_size`` is the *local* (per-worker) batch the
    oracle prices. At least one of ``duration_s`` (measured run time in the original
    cluster) and ``iterations`` (work to do) is set.
    """

    id: str
    submit_time_s: float
    num_workers: int
    model: str
    batch_size: int
    duration_s: float | None = None
    iterations: int | None = None
    priority: float = 1.0
    user: str | None = None
    """User, queue or virtual cluster, when the trace records one."""
    spb: str | None = None
    """SPB plan spec (job lists only; ``None`` means the scheduler decides)."""
    parallelism: str | None = None
    """Plan type (job lists only). ``None``: data parallel, as the traces' jobs ran (and the
    replay then spends nothing on choosing a type)."""
    original_model: str | None = None
    """The trace's own name for the workload (Pollux application, Gavel job type)."""
    elasticity: Elasticity | None = None
    """Set when the trace's semantics let a policy resize the job (Pollux workloads);
    ``num_workers`` and ``batch_size`` are then its initial request."""
    source: str = ""
    """``path:line`` this job came from."""


def parse_positive_int(text: str, what: str, path: str, line: int) -> int:
    try:
        value = int(text)
    except (TypeError, ValueError):
        value = _integral_float(text, what, path, line)
    if value < 1:
        raise TraceFormatError(path, line, f"{what} must be >= 1, got {value}")
    return value


def parse_non_negative_float(text: str, what: str, path: str, line: int) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise TraceFormatError(path, line, f"{what} must be a number, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise TraceFormatError(path, line, f"{what} must be a finite number >= 0, got {text!r}")
    return value


def _integral_float(text: str, what: str, path: str, line: int) -> int:
    """Accept ``"4.0"`` (some traces write counts as floats) but not ``"1.5"``."""
    try:
        as_float = float(text)
    except (TypeError, ValueError):
        as_float = math.nan
    if not math.isfinite(as_float) or not as_float.is_integer():
        raise TraceFormatError(path, line, f"{what} must be an integer, got {text!r}")
    return int(as_float)
