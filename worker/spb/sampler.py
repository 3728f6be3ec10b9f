"""Deterministic data order shared by all ranks, with a position that can be checkpointed.

Each epoch is a permutation of the training set seeded by ``(seed, epoch)``. An iteration takes
the next ``world_size * batch_size`` indices (the global batch) and rank ``r`` keeps the
``r``-th slice, so every rank knows every other rank's batch without communicating, a simulated
group sees exactly the data a real one would, and the position ``(epoch, offset)`` in global
samples means the same thing after a restore with a different world size. A tail shorter than
a global batch is dropped (the epoch then ends).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from jigsaw.model.errors import InvalidSpecError


@dataclass
class GlobalBatchSampler:
    dataset_size: int
    batch_size: int
    world_size: int
    seed: int
    epoch: int = 0
    offset: int = 0

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise InvalidSpecError(
                f"batch size must be >= 1, got {self.batch_size}", field="batch_size"
            )
        if self.global_batch > self.dataset_size:
            raise InvalidSpecError(
                f"global batch {self.global_batch} ({self.world_size} workers x "
                f"{self.batch_size}) exceeds the {self.dataset_size} training samples",
                field="batch_size",
            )
        self._order: torch.Tensor | None = None
        self._order_epoch = -1

    @property
    def global_batch(self) -> int:
        return self.batch_size * self.world_size

    def _epoch_order(self) -> torch.Tensor:
        if self._order_epoch != self.epoch:
            generator = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
            self._order = torch.randperm(self.dataset_size, generator=generator)
            self._order_epoch = self.epoch
        assert self._order is not None
        return self._order

    def next_indices(self, rank: int) -> torch.Tensor:
        """Advance one iteration; return this rank's sample indices."""
        if self.offset + self.global_batch > self.dataset_size:
            self.epoch, self.offset = self.epoch + 1, 0
        start = self.offset + rank * self.batch_size
        indices = self._epoch_order()[start : start + self.batch_size]
        self.offset += self.global_batch
        return indices

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "offset": self.offset, "seed": self.seed}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch, self.offset, self.seed = state["epoch"], state["offset"], state["seed"]
        self._order_epoch = -1
