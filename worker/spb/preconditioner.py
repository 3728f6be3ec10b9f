"""The space the gradient noise is measured in: Adam's preconditioned space, or plain gradients.

SGD steps along the gradient, so its noise is measured on the gradient itself. Adam and AdamW
step along the gradient divided, element by element, by ``sqrt(v_hat) + eps`` (``v_hat``: the
bias-corrected second-moment estimate in the optimizer's state), so the noise that decides how
far a step goes is the noise of that preconditioned gradient. As AdaptDL does for Adam, both
squared norms of the two-batch estimator (:mod:`worker.spb.noise`) are then taken of
``g / (sqrt(v_hat) + eps)``::

    |g|_P^2 = sum_i (g_i / (sqrt(v_i / (1 - beta2^t)) + eps))^2      (t: the optimizer's step)

The preconditioner is the state *before* this iteration's step (the one the gradient meets),
identical on every rank, so contributors and receivers measure in the same space. Before the
optimizer's first step there is no ``v``: such a block's observation is skipped rather than
measured on plain gradients, so that the smoothed statistics never mix two spaces whose scales
differ by orders of magnitude (AdaptDL uses plain gradients for Adam's first 5 steps instead).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn


class AdamPreconditioner:
    """``1 / (sqrt(v_hat) + eps)`` per element, read from a torch Adam or AdamW's state."""

    def __init__(self, optimizer: torch.optim.Optimizer) -> None:
        self.optimizer = optimizer
        self._group: dict[int, dict[str, Any]] = {
            id(param): group for group in optimizer.param_groups for param in group["params"]
        }

    def ready(self, params: Sequence[nn.Parameter]) -> bool:
        """Whether every parameter has a second moment (the optimizer has stepped it)."""
        for param in params:
            state = self.optimizer.state.get(param)
            if not state or "exp_avg_sq" not in state or float(state["step"]) < 1:
                return False
        return True

    def _denominator(self, param: nn.Parameter) -> Tensor:
        """``sqrt(v_hat) + eps`` as torch's Adam computes it (AMSGrad's running max if on)."""
        group = self._group[id(param)]
        state = self.optimizer.state[param]
        beta2 = float(group["betas"][1])
        second: Tensor = state["max_exp_avg_sq"] if group.get("amsgrad") else state["exp_avg_sq"]
        correction = 1.0 - beta2 ** float(state["step"])
        return (second.sqrt() / math.sqrt(correction)).add_(float(group["eps"]))

    def squared_norm(self, params: Sequence[nn.Parameter], flat: Tensor) -> Tensor:
        """``|flat|_P^2`` for a block's flattened gradient (``params``' elements in order)."""
        parts = []
        offset = 0
        for param in params:
            count = param.numel()
            scaled = flat[offset : offset + count] / self._denominator(param).reshape(-1)
            parts.append(torch.linalg.vector_norm(scaled).square())
            offset += count
        return torch.stack(parts).sum()


def noise_preconditioner(optimizer: torch.optim.Optimizer) -> AdamPreconditioner | None:
    """Adam's preconditioner for Adam and AdamW (a subclass in torch); ``None`` (plain
    gradients) for SGD and any other optimizer."""
    if isinstance(optimizer, (torch.optim.Adam, torch.optim.AdamW)):
        return AdamPreconditioner(optimizer)
    return None
