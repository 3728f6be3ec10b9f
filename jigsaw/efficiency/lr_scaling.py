"""The learning rate of an adaptive batch: how a job's learning rate follows its global batch,
as AdaptDL scales it (Pollux, OSDI'21, section 4.1).

- **SGD: AdaScale** (Johnson et al., ICML'20). At ``scale = batch / base_batch`` the learning
  rate is ``gain x base_lr`` with the gain ratio

      gain = (var + sqr) / (var / scale + sqr)

  where ``sqr`` estimates ``|G|^2`` and ``var`` the variance of the gradient at the base
  batch, both summed over the model's blocks from the job's own gradient-noise statistics
  (:class:`~jigsaw.model.block_noise.BlockNoise`). When the gradient is mostly noise the gain
  tends to ``scale`` (the linear rule); when it is mostly signal, to 1 (a larger batch buys
  nothing, so the step stays). Without statistics the gain is 1: the rate is left as tuned.
- **Adam and AdamW: the square-root rule**, ``sqrt(scale) x base_lr``.

At the base batch every rule returns ``base_lr`` exactly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from jigsaw.model.block_noise import BlockNoise

ADAPTIVE_OPTIMIZERS = ("sgd", "adam", "adamw")


def adascale_gain(scale: float, noise: Sequence[BlockNoise], base_batch: int) -> float:
    """AdaScale's gain ratio at ``scale`` times the base batch (1 without statistics)."""
    if scale <= 0:
        raise ValueError(f"scale must be positive, got {scale}")
    sqr = sum(max(entry.grad_sqr, 0.0) for entry in noise)
    # grad_var is the variance of a batch-`batch` gradient: per-sample variance / batch.
    var = sum(max(entry.grad_var, 0.0) * entry.batch for entry in noise) / base_batch
    if var + sqr <= 0.0 or not math.isfinite(var + sqr):
        return 1.0
    return (var + sqr) / (var / scale + sqr)


def scaled_learning_rate(
    base_lr: float,
    base_batch: int,
    batch: int,
    optimizer: str,
    noise: Sequence[BlockNoise] = (),
) -> float:
    """The learning rate at global ``batch`` for a rate tuned at ``base_batch``."""
    if base_batch < 1 or batch < 1:
        raise ValueError(f"batches must be positive, got {base_batch} and {batch}")
    scale = batch / base_batch
    if batch == base_batch:
        return base_lr
    if optimizer in ("adam", "adamw"):
        return base_lr * math.sqrt(scale)
    if optimizer == "sgd":
        return base_lr * adascale_gain(scale, noise, base_batch)
    raise ValueError(f"no learning-rate rule for optimizer {optimizer!r}: use sgd, adam or adamw")
