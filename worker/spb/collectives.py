"""The communication seam of the SPB engine, and how it counts bytes.

The trainer talks to a :class:`Collectives` object only. Two implementations share the exact
same trainer code: :mod:`worker.spb.torch_collectives` (torch.distributed; gloo on CPU, NCCL on
GPU) and :mod:`worker.spb.thread_collectives` (ranks as threads of one process, used to simulate
a data-parallel group quickly for the efficiency runs).

Byte accounting (bytes a rank *sends*, payload only, no headers):

- all-reduce among ``n`` ranks of ``S`` bytes: ``2 (n-1)/n * S`` per member. This is the
  bandwidth-optimal ring algorithm (reduce-scatter then all-gather), which NCCL uses for large
  tensors; gloo picks its own algorithm, so for gloo the figure is the model, not a packet
  capture.
- point-to-point send of ``S`` bytes: ``S`` for the sender, 0 for the receiver. The SPB
  delivery step is a flat broadcast built from such sends, so the root is charged
  ``S * receivers``. A tree broadcast would spread the same total over forwarding ranks; the
  mean over ranks (what the benchmarks compare) is the same either way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

from jigsaw.model.errors import JigsawError


class CollectiveError(JigsawError):
    """A collective failed or timed out (a peer died or the ranks disagree on the plan)."""


class Work(Protocol):
    # torch's Work.wait returns a bool; ours return None. Callers ignore the value.
    def wait(self) -> object: ...


class DoneWork:
    """An operation that completed synchronously."""

    def wait(self) -> None:
        return None


def ring_all_reduce_bytes(nbytes: int, members: int) -> float:
    return 2.0 * (members - 1) / members * nbytes if members > 1 else 0.0


@dataclass
class TrafficCounter:
    """Modelled bytes this rank sent; ``take`` returns and resets the per-iteration figure."""

    total_bytes: float = 0.0
    _since_take: float = 0.0

    def add(self, nbytes: float) -> None:
        self.total_bytes += nbytes
        self._since_take += nbytes

    def take(self) -> int:
        value, self._since_take = self._since_take, 0.0
        return round(value)


class Collectives(Protocol):
    """Asynchronous group operations among a subset of ranks. Every method that takes
    ``ranks`` must be called by exactly those ranks, in the same order on each of them."""

    rank: int
    world_size: int
    device: torch.device
    traffic: TrafficCounter
    backend: str

    def prepare_groups(self, groups: Sequence[tuple[int, ...]]) -> None:
        """Create (collectively, on every rank) the subgroups a plan needs; cached."""
        ...

    def all_reduce_sum(self, tensor: torch.Tensor, ranks: tuple[int, ...]) -> Work: ...

    def send(self, tensor: torch.Tensor, dst: int, tag: int) -> Work: ...

    def recv(self, tensor: torch.Tensor, src: int, tag: int) -> Work: ...

    def barrier(self) -> None: ...
