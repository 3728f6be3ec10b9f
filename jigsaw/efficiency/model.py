"""The eta model: SPB statistical efficiency from per-block gradient noise (docs/SPB.md).

For a plan with ``N`` workers of batch ``B`` each, block ``b`` averages ``|C_b|`` workers'
gradients. With per-block statistics ``sqr_b = |G_b|^2`` and ``var_b`` (variance of one
worker's batch-``B`` gradient of block ``b``)::

    eta(plan) = (S + sum_b var_b / N) / (S + sum_b var_b / |C_b|),   S = sum_b sqr_b

which is the ratio of the expected loss decrease per iteration under SPB to full backprop's,
for a step size chosen for the gradient it is given (McCandlish et al. 2018's model, applied
with the block-wise batch sizes). Written per block it is a weighted harmonic mean::

    1 / eta = sum_b w_b / r_b,   r_b = (sqr_b + var_b / N) / (sqr_b + var_b / |C_b|),
                                 w_b = (sqr_b + var_b / N) / sum_c (sqr_c + var_c / N)

``r_b`` is Pollux's efficiency of block ``b`` at ``|C_b|`` instead of ``N`` workers and
``w_b`` is the block's share of the full-backprop gradient's expected squared norm: a block
with a large, noisy gradient weighs more than a block with a small one, which is how the model
counts each block's share of the progress rather than taking a plain mean over blocks.
Properties: eta = 1 exactly for full backprop; eta never rises when any depth rises; eta is in
``[min_b |C_b| / N, 1]``.

The same physics gives Pollux's batch-size efficiency :func:`batch_size_efficiency`.

:class:`OnlineEta` is the per-job estimator the control plane keeps: it takes the per-block
statistics of each lease report (validated; NaN/inf refused without touching the estimate) and
answers eta for any candidate plan, naming its source: ``online`` (from the job's own
statistics), ``curve`` (from a recorded statistics curve), ``measured table`` or ``default``
(the prior, until every block has been measured).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from jigsaw.efficiency.table import (
    CONSERVATIVE_DEFAULT,
    FULL_BACKPROP,
    MEASURED,
    MEASURED_SHAPE,
    MIN_ETA,
    EtaEstimate,
    conservative_default,
)
from jigsaw.model.block_noise import (
    BlockNoise,
    InvalidNoiseStatisticsError,
    validate_block_noise,
)
from jigsaw.model.plan import SPBPlan

ONLINE = "online"
CURVE = "curve"
MEASURED_TABLE = "measured table"
DEFAULT = "default"
DEFAULT_MIN_OBSERVATIONS = 10

__all__ = [
    "CURVE",
    "DEFAULT",
    "MEASURED_TABLE",
    "ONLINE",
    "BlockNoise",
    "EtaEstimate",
    "InvalidNoiseStatisticsError",
    "OnlineEta",
    "batch_size_efficiencies",
    "batch_size_efficiency",
    "block_efficiency",
    "eta_for_plan",
    "prior_from_table",
]


def block_efficiency(grad_sqr: float, grad_var: float, contributors: int, workers: int) -> float:
    """Pollux's per-iteration efficiency of one block averaged over ``contributors`` instead of
    ``workers`` batches: ``(sqr + var/N) / (sqr + var/|C|)``."""
    sqr = max(0.0, grad_sqr)
    full = sqr + grad_var / workers
    partial = sqr + grad_var / contributors
    return 1.0 if partial <= 0.0 else full / partial


def batch_size_efficiency(grad_sqr: float, grad_var: float, scale: float) -> float:
    """Pollux's statistical efficiency ``E = (var + sqr) / (var / s + sqr) / s`` of training at
    ``s`` times the batch at which ``grad_var`` was measured (progress per sample relative to
    that batch; whole-model sums of the per-block figures)."""
    if scale <= 0.0 or not math.isfinite(scale):
        raise ValueError(f"batch scale must be a positive number, got {scale!r}")
    return float(batch_size_efficiencies(grad_sqr, grad_var, scale))


def batch_size_efficiencies(
    grad_sqr: float, grad_var: float, scales: ArrayLike
) -> NDArray[np.float64]:
    """:func:`batch_size_efficiency` at many scales at once, the one place the formula is
    written (the goodput model's :meth:`~jigsaw.goodput.noise.GradientNoise.efficiency`
    calls it). A scale that is not positive gets 0: no batch, no progress.

    With no signal (``sqr = 0``) any noise makes every sample count fully (1); with neither
    signal nor noise, progress per sample falls as ``1 / s``."""
    s = np.asarray(scales, dtype=np.float64)
    sqr = max(0.0, grad_sqr)
    positive = s > 0.0
    safe = np.where(positive, s, 1.0)
    denominator = grad_var / safe + sqr
    with np.errstate(divide="ignore", invalid="ignore"):
        efficiency = np.where(denominator > 0.0, (grad_var + sqr) / denominator / safe, 1.0 / safe)
    result: NDArray[np.float64] = np.where(positive, efficiency, 0.0)
    return result


def eta_for_plan(
    stats: Sequence[BlockNoise],
    plan: SPBPlan,
    *,
    batch: int | None = None,
    source: str = ONLINE,
) -> EtaEstimate:
    """eta of ``plan`` from statistics of every block (the module formula).

    ``batch`` is the candidate's per-worker batch; variances measured at another batch are
    rescaled (``var ~ 1/batch``). Raises :class:`InvalidNoiseStatisticsError` if a block has no
    statistics or they are not finite.
    """
    if plan.is_full_backprop:
        return EtaEstimate(1.0, FULL_BACKPROP)
    by_block = {s.block: s for s in validate_block_noise(stats, plan.num_blocks, origin=source)}
    missing = [b for b in range(1, plan.num_blocks + 1) if b not in by_block]
    if missing:
        raise InvalidNoiseStatisticsError(f"{source}: no statistics for block(s) {missing}")
    workers = plan.num_workers
    full = partial = 0.0
    for block in range(1, plan.num_blocks + 1):
        entry = by_block[block]
        var = entry.grad_var * (entry.batch / batch if batch else 1.0)
        sqr = max(0.0, entry.grad_sqr)
        full += sqr + var / workers
        partial += sqr + var / len(plan.contributors(block))
    eta = 1.0 if partial <= 0.0 else full / partial
    return EtaEstimate(max(MIN_ETA, min(1.0, eta)), source)


Prior = Callable[[SPBPlan], EtaEstimate]


def default_prior(plan: SPBPlan) -> EtaEstimate:
    if plan.is_full_backprop:
        return EtaEstimate(1.0, FULL_BACKPROP)
    return EtaEstimate(conservative_default(plan), DEFAULT)


def prior_from_table(lookup: Callable[[SPBPlan], EtaEstimate]) -> Prior:
    """Wrap an :class:`~jigsaw.efficiency.table.EfficiencyTable` lookup (``lambda p:
    table.lookup(model, p)``) so its estimates carry this module's source names."""
    names = {
        MEASURED: MEASURED_TABLE,
        MEASURED_SHAPE: MEASURED_TABLE,
        CONSERVATIVE_DEFAULT: DEFAULT,
    }

    def prior(plan: SPBPlan) -> EtaEstimate:
        estimate = lookup(plan)
        return EtaEstimate(estimate.eta, names.get(estimate.source, estimate.source))

    return prior


@dataclass
class OnlineEta:
    """A job's running eta estimate, fed with the per-block statistics of its lease reports.

    ``update`` validates before it stores: a report with NaN/inf (or otherwise meaningless)
    statistics raises :class:`InvalidNoiseStatisticsError` and leaves the estimate as it was.
    Until every block has at least ``min_observations`` smoothed observations, ``estimate``
    answers from ``prior``.
    """

    num_blocks: int
    prior: Prior = default_prior
    min_observations: int = DEFAULT_MIN_OBSERVATIONS

    def __post_init__(self) -> None:
        self._latest: dict[int, BlockNoise] = {}
        self.reports = 0

    def update(self, stats: Sequence[BlockNoise]) -> None:
        accepted = validate_block_noise(stats, self.num_blocks, origin="lease report")
        for entry in accepted:
            current = self._latest.get(entry.block)
            if current is None or entry.last_iteration >= current.last_iteration:
                self._latest[entry.block] = entry
        self.reports += 1

    @property
    def statistics(self) -> tuple[BlockNoise, ...]:
        return tuple(self._latest[b] for b in sorted(self._latest))

    @property
    def ready(self) -> bool:
        return all(
            b in self._latest and self._latest[b].observations >= self.min_observations
            for b in range(1, self.num_blocks + 1)
        )

    def estimate(self, plan: SPBPlan, *, batch: int | None = None) -> EtaEstimate:
        if plan.num_blocks != self.num_blocks:
            raise InvalidNoiseStatisticsError(
                f"plan is for {plan.num_blocks} blocks but the job reports {self.num_blocks}"
            )
        if plan.is_full_backprop:
            return EtaEstimate(1.0, FULL_BACKPROP)
        if not self.ready:
            return self.prior(plan)
        return eta_for_plan(self.statistics, plan, batch=batch, source=ONLINE)
