"""Per-block gradient noise: the statistics a job's workers measure and report.

Block ``b`` of an SPB job is trained by ``n = |C_b|`` contributors, each with a batch of ``B``
samples. At every reduce the group knows, for that block,

- ``local_sqr``: the mean over contributors of ``|g_r|^2``, the squared norm of each
  contributor's own (batch-``B``) gradient, and
- ``total_sqr``: ``|g|^2``, the squared norm of their mean (a batch of ``n B`` samples).

With ``G`` the true gradient and ``S = tr(Sigma)`` the per-sample gradient variance,
``E|g_B|^2 = |G|^2 + S / B``. Two batch sizes give two equations and an unbiased estimate of
both unknowns (McCandlish et al. 2018, "An Empirical Model of Large-Batch Training", App. A;
Pollux/AdaptDL use the same estimator across replicas)::

    grad_sqr = (n * total_sqr - local_sqr) / (n - 1)          # estimates |G|^2
    grad_var = n * (local_sqr - total_sqr) / (n - 1)          # estimates S / B

``grad_var`` is the variance of one worker's batch-``B`` gradient (Pollux's convention: the
variance at the base batch), so a mean over ``m`` workers has variance ``grad_var / m``. Each is
unbiased; a single iteration's estimate is very noisy (``grad_sqr`` can be negative), hence the
smoothing in the worker. With ``n = 1`` there is no second batch size and no estimate.

This module is pure (no torch): the worker computes the two squared norms, these functions turn
them into statistics, and the control plane validates what arrives in lease reports.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from jigsaw.model.errors import InvalidSpecError


class InvalidNoiseStatisticsError(InvalidSpecError):
    """Reported gradient statistics are not finite or not meaningful; they are refused whole."""

    def __init__(self, message: str) -> None:
        super().__init__(message, field="block_noise")


@dataclass(frozen=True, slots=True)
class BlockNoise:
    """Smoothed gradient statistics of one block (1-based ``block``), as reported by a job.

    ``grad_sqr`` estimates ``|G_b|^2``; ``grad_var`` the variance (trace) of one worker's
    batch-``batch`` gradient of the block; ``observations`` counts the iterations that fed the
    smoothing; ``last_iteration`` is the newest of them (staleness); ``contributors`` the
    ``|C_b|`` of that newest observation.
    """

    block: int
    grad_sqr: float
    grad_var: float
    batch: int
    observations: int
    last_iteration: int
    contributors: int

    @property
    def noise_scale(self) -> float:
        """McCandlish's simple noise scale ``B_simple = S / |G|^2`` in samples (inf if the
        gradient estimate is not positive)."""
        if self.grad_sqr <= 0.0:
            return math.inf
        return self.grad_var * self.batch / self.grad_sqr

    def as_dict(self) -> dict[str, float | int]:
        return {
            "block": self.block,
            "grad_sqr": self.grad_sqr,
            "grad_var": self.grad_var,
            "batch": self.batch,
            "observations": self.observations,
            "last_iteration": self.last_iteration,
            "contributors": self.contributors,
        }


def two_batch_estimate(
    total_sqr: float, local_sqr: float, contributors: int
) -> tuple[float, float]:
    """``(grad_sqr, grad_var)`` from one reduce over ``contributors >= 2`` equal batches."""
    if contributors < 2:
        raise ValueError("the two-batch estimator needs at least two contributors")
    n = float(contributors)
    grad_sqr = (n * total_sqr - local_sqr) / (n - 1.0)
    grad_var = n * (local_sqr - total_sqr) / (n - 1.0)
    return grad_sqr, grad_var


def validate_block_noise(
    stats: Sequence[BlockNoise], num_blocks: int | None = None, *, origin: str = "report"
) -> tuple[BlockNoise, ...]:
    """The entry point for statistics arriving from outside (lease reports).

    Refuses the whole report, naming the block and the field, when any figure is NaN or
    infinite, a variance is negative beyond rounding, a block is outside the model, repeated,
    or counts are not positive. Accepted statistics are returned as a tuple sorted by block.
    ``grad_sqr`` may be slightly negative (an unbiased estimate of a small quantity).
    """
    seen: set[int] = set()
    for entry in stats:
        where = f"{origin}: block {entry.block}"
        for name in ("grad_sqr", "grad_var"):
            value = getattr(entry, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value):
                raise InvalidNoiseStatisticsError(f"{where}: {name} is {value!r}, not finite")
        if entry.grad_var < 0.0:
            raise InvalidNoiseStatisticsError(
                f"{where}: grad_var {entry.grad_var!r} is negative (a variance cannot be)"
            )
        if entry.block < 1 or (num_blocks is not None and entry.block > num_blocks):
            limit = f"1..{num_blocks}" if num_blocks is not None else ">= 1"
            raise InvalidNoiseStatisticsError(f"{where}: block must be in {limit}")
        if entry.block in seen:
            raise InvalidNoiseStatisticsError(f"{where}: reported twice")
        seen.add(entry.block)
        if entry.batch < 1 or entry.observations < 1 or entry.contributors < 1:
            raise InvalidNoiseStatisticsError(
                f"{where}: batch, observations and contributors must be >= 1"
            )
    return tuple(sorted(stats, key=lambda s: s.block))


def parse_block_noise(
    raw: Any, num_blocks: int | None = None, *, origin: str = "report"
) -> tuple[BlockNoise, ...]:
    """Statistics from their JSON form (a lease summary's ``metrics["block_noise"]``: a list of
    objects with :class:`BlockNoise`'s fields), validated as :func:`validate_block_noise` does.
    A missing or mistyped field names its position and field."""
    if not isinstance(raw, list):
        raise InvalidNoiseStatisticsError(f"{origin}: block_noise must be a list of objects")
    names = [f.name for f in fields(BlockNoise)]
    parsed = []
    for position, entry in enumerate(raw):
        where = f"{origin}: block_noise[{position}]"
        if not isinstance(entry, dict):
            raise InvalidNoiseStatisticsError(f"{where} must be an object")
        missing = [name for name in names if name not in entry]
        if missing:
            raise InvalidNoiseStatisticsError(f"{where} lacks {', '.join(missing)}")
        try:
            parsed.append(
                BlockNoise(
                    block=int(entry["block"]),
                    grad_sqr=float(entry["grad_sqr"]),
                    grad_var=float(entry["grad_var"]),
                    batch=int(entry["batch"]),
                    observations=int(entry["observations"]),
                    last_iteration=int(entry["last_iteration"]),
                    contributors=int(entry["contributors"]),
                )
            )
        except (TypeError, ValueError, OverflowError) as error:
            raise InvalidNoiseStatisticsError(f"{where} has a malformed field: {error}") from None
    return validate_block_noise(parsed, num_blocks, origin=origin)
