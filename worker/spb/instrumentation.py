"""Per-iteration, per-rank measurements that are cheap enough to leave on.

- Compute times: wall-clock phases on CPU; CUDA events on GPU (resolved once per iteration,
  after the loss is read, so no extra device synchronisation is added).
- Saved-activation bytes: every tensor autograd saves for backward passes through a
  ``saved_tensors_hooks`` pack hook; we count the bytes of each *distinct storage* once and
  skip parameter storages (weights are not activations). The no-grad prefix saves nothing.
- Peak memory: ``torch.cuda.max_memory_allocated`` on GPU. On CPU there is no allocator
  high-water mark per iteration, so we report an accounting figure: parameter + gradient +
  optimizer-state bytes + saved-activation bytes (transient workspace excluded). The process's
  peak RSS is reported separately as an upper bound that includes the Python runtime.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from types import TracebackType
from typing import Any

import torch
from torch import Tensor


@dataclass(frozen=True, slots=True)
class IterationMetrics:
    iteration: int
    rank: int
    depth: int
    plan: str
    loss: float
    samples: int
    forward_time_s: float
    backward_time_s: float
    sync_time_s: float
    optimizer_time_s: float
    iteration_time_s: float
    saved_activation_bytes: int
    peak_memory_bytes: int
    peak_rss_bytes: int
    bytes_sent: int
    probe: bool = False
    """A full-backprop probe iteration (gradient-noise statistics for single-contributor
    blocks), not the plan's own depth."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class SavedActivationMeter:
    """Context manager counting distinct saved storages (excluding parameters)."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self._excluded: set[int] = set()
        self._seen: dict[int, int] = {}
        self._hooks: torch.autograd.graph.saved_tensors_hooks | None = None

    def exclude(self, tensors: Sequence[Tensor]) -> None:
        self._excluded = {t.untyped_storage().data_ptr() for t in tensors}

    @property
    def total_bytes(self) -> int:
        return sum(self._seen.values())

    def _pack(self, tensor: Tensor) -> Tensor:
        storage = tensor.untyped_storage()
        key = storage.data_ptr()
        if key not in self._excluded and key not in self._seen:
            self._seen[key] = storage.nbytes()
        return tensor

    @staticmethod
    def _unpack(tensor: Tensor) -> Tensor:
        return tensor

    def __enter__(self) -> SavedActivationMeter:
        self._seen = {}
        if self.enabled:
            self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)
            self._hooks.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._hooks is not None:
            self._hooks.__exit__(exc_type, exc, tb)
            self._hooks = None


class PhaseClock:
    """Marks phase boundaries; ``durations`` are seconds between consecutive marks."""

    def __init__(self, device: torch.device) -> None:
        self._cuda = device.type == "cuda"
        self._marks: list[tuple[str, Any]] = []

    def start(self) -> None:
        self._marks = []
        self.mark("start")

    def mark(self, name: str) -> None:
        if self._cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self._marks.append((name, event))
        else:
            self._marks.append((name, time.perf_counter()))

    def durations(self) -> dict[str, float]:
        result: dict[str, float] = {}
        if self._cuda:
            self._marks[-1][1].synchronize()
        for (_, earlier), (name, later) in zip(self._marks, self._marks[1:], strict=False):
            if self._cuda:
                result[name] = earlier.elapsed_time(later) / 1000.0
            else:
                result[name] = later - earlier
        return result


def peak_rss_bytes() -> int:
    # ru_maxrss is in KiB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def tensor_bytes(tensors: Sequence[Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def optimizer_state_bytes(optimizer: torch.optim.Optimizer) -> int:
    return sum(
        value.numel() * value.element_size()
        for state in optimizer.state.values()
        for value in state.values()
        if isinstance(value, Tensor)
    )
