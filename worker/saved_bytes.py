"""Counting memory the engines hold: distinct storages autograd saves, and tensors' bytes.

Shared by the pipeline and hybrid engines (worker/pipeline, worker/hybrid) for their
per-worker memory figures; the SPB engine has its own meter (worker/spb/instrumentation.py).
"""

from __future__ import annotations

from collections.abc import Iterable

from torch import Tensor


class SavedBytes:
    """A ``saved_tensors_hooks`` pair that counts distinct storages autograd saves, excluding
    the given storages (parameters or weight versions, counted elsewhere)."""

    def __init__(self, excluded: set[int]) -> None:
        self.excluded = excluded
        self.seen: dict[int, int] = {}

    def pack(self, tensor: Tensor) -> Tensor:
        storage = tensor.untyped_storage()
        key = storage.data_ptr()
        if key not in self.excluded and key not in self.seen:
            self.seen[key] = storage.nbytes()
        return tensor

    @staticmethod
    def unpack(tensor: Tensor) -> Tensor:
        return tensor


def tensor_bytes(tensors: Iterable[Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)
