"""Per-block gradient noise, measured at the contributor reduce and smoothed over iterations.

Each reduce of block ``b`` carries one extra number: every contributor appends the squared norm
of its own flattened gradient to the buffer it all-reduces, so after the reduce (and the
delivery, which sends the same buffer) every rank holds ``local_sqr`` (mean over contributors
of ``|g_r|^2``) and can compute ``total_sqr = |mean|^2`` itself. That costs 4 bytes per block
and one dot product per block on each side; no extra collective. The unbiased two-batch
estimator (:func:`jigsaw.model.block_noise.two_batch_estimate`) turns the pair into
``(grad_sqr, grad_var)``; blocks with a single contributor give nothing (see the probe
iterations in :class:`~worker.spb.trainer.SPBTrainer`). For Adam and AdamW both squared norms
are taken in Adam's preconditioned space (:mod:`worker.spb.preconditioner`); this tracker does
not know the difference.

Raw per-iteration estimates are very noisy, so both are smoothed with a bias-corrected
exponential moving average (as AdaptDL does). The pair of squared norms stays a device tensor
until the end of the iteration, when all blocks are read at once (one transfer, after the
loss has already been read), so the GPU path adds no synchronisation of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from jigsaw.model.block_noise import BlockNoise, two_batch_estimate

DEFAULT_DECAY = 0.95


@dataclass
class _Smoothed:
    sqr: float = 0.0
    var: float = 0.0
    weight: float = 0.0
    observations: int = 0
    last_iteration: int = -1
    contributors: int = 0


class BlockNoiseTracker:
    """Smoothed ``(grad_sqr, grad_var)`` per block; identical on every rank of a group."""

    def __init__(self, num_blocks: int, batch_size: int, decay: float = DEFAULT_DECAY) -> None:
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"noise smoothing decay must be in [0, 1), got {decay}")
        self.num_blocks = num_blocks
        self.batch_size = batch_size
        self.decay = decay
        self._state = {b: _Smoothed() for b in range(1, num_blocks + 1)}
        self._pending: list[tuple[int, int, Tensor]] = []
        self.raw: dict[int, tuple[float, float]] = {}
        """The last iteration's unsmoothed estimates per block (benchmarks read them)."""

    def record(self, block: int, contributors: int, norms: Tensor) -> None:
        """Queue one reduce of ``block``: ``norms = [total_sqr, local_sqr]`` (a device tensor)."""
        if contributors >= 2:
            self._pending.append((block, contributors, norms))

    def end_iteration(self, iteration: int) -> None:
        """Fold the iteration's reduces into the smoothed statistics (one device read)."""
        self.raw = {}
        if not self._pending:
            return
        values = torch.stack([norms for _, _, norms in self._pending]).double().cpu().tolist()
        for (block, contributors, _), (total_sqr, local_sqr) in zip(
            self._pending, values, strict=True
        ):
            grad_sqr, grad_var = two_batch_estimate(total_sqr, local_sqr, contributors)
            self.raw[block] = (grad_sqr, grad_var)
            state = self._state[block]
            state.sqr = self.decay * state.sqr + (1.0 - self.decay) * grad_sqr
            state.var = self.decay * state.var + (1.0 - self.decay) * grad_var
            state.weight = self.decay * state.weight + (1.0 - self.decay)
            state.observations += 1
            state.last_iteration = iteration
            state.contributors = contributors
        self._pending.clear()

    def snapshot(self) -> tuple[BlockNoise, ...]:
        """Bias-corrected smoothed statistics of every block observed so far."""
        result = []
        for block, state in self._state.items():
            if state.observations == 0:
                continue
            result.append(
                BlockNoise(
                    block=block,
                    grad_sqr=state.sqr / state.weight,
                    # Unbiased but noisy: an early average can dip below zero; a variance cannot.
                    grad_var=max(0.0, state.var / state.weight),
                    batch=self.batch_size,
                    observations=state.observations,
                    last_iteration=state.last_iteration,
                    contributors=state.contributors,
                )
            )
        return tuple(result)

    def missing_blocks(self) -> list[int]:
        return [b for b, s in self._state.items() if s.observations == 0]

    def state_dict(self) -> dict[int, tuple[float, float, float, int, int, int]]:
        return {
            b: (s.sqr, s.var, s.weight, s.observations, s.last_iteration, s.contributors)
            for b, s in self._state.items()
        }

    def load_state_dict(self, state: dict[int, tuple[float, float, float, int, int, int]]) -> None:
        for block, values in state.items():
            if int(block) in self._state:
                self._state[int(block)] = _Smoothed(*values)
