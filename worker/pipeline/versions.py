"""Weight versions of one pipeline stage, and the out-of-place optimizer that makes them.

A version is a list of leaf tensors that is never modified in place: autograd graphs of
micro-batches still in flight keep pointing at the version they ran forward with (weight
stashing), while the optimizer writes the next version into new tensors. PipeDream-2BW keeps
at most two versions alive; GPipe-style flushing keeps one.

Version numbering follows the 2BW rule W(t+1) = W(t) - lr * grad f(W(t-1)): batch ``t`` runs
on version ``t - 1`` (batch 0 on W(0), stored as version -1), and its coalesced gradient
updates the newest version ``t`` into ``t + 1``. Under ``gpipe`` batch ``t`` runs on W(t).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor


@dataclass
class MomentumSGD:
    """torch.optim.SGD semantics (momentum, no dampening, L2 weight decay), out of place.

    ``buffers`` is the optimizer state: one momentum tensor per parameter, updated in place
    (nothing else references it).
    """

    lr: float
    momentum: float = 0.0
    weight_decay: float = 0.0
    buffers: list[Tensor] | None = None

    def step(self, weights: list[Tensor], grads: list[Tensor]) -> list[Tensor]:
        with torch.no_grad():
            directions: list[Tensor] = []
            for i, (w, g) in enumerate(zip(weights, grads, strict=True)):
                d = g.add(w, alpha=self.weight_decay) if self.weight_decay else g
                if self.momentum:
                    if self.buffers is None:
                        self.buffers = [torch.zeros(0) for _ in weights]
                    buf = self.buffers[i]
                    if buf.numel() == 0:
                        buf = d.detach().clone()
                        self.buffers[i] = buf
                    else:
                        buf.mul_(self.momentum).add_(d)
                    d = buf
                directions.append(d)
            return [
                w.detach().add(d, alpha=-self.lr).requires_grad_(True)
                for w, d in zip(weights, directions, strict=True)
            ]

    def state_bytes(self) -> int:
        return sum(b.numel() * b.element_size() for b in self.buffers or [])


@dataclass
class WeightVersions:
    """Live versions of one stage's parameters, by version number."""

    versions: dict[int, list[Tensor]] = field(default_factory=dict)

    @classmethod
    def initial(cls, weights: list[Tensor], two_versions: bool) -> WeightVersions:
        first = [w.detach().requires_grad_(True) for w in weights]
        live = {0: first}
        if two_versions:
            # W(-1) = W(0): same storage (nothing writes in place), separate leaves and grads.
            live[-1] = [w.detach().requires_grad_(True) for w in first]
        return cls(live)

    @property
    def newest(self) -> int:
        return max(self.versions)

    def get(self, version: int) -> list[Tensor]:
        try:
            return self.versions[version]
        except KeyError:
            raise RuntimeError(
                f"weight version {version} is not live (live: {sorted(self.versions)})"
            ) from None

    def add(self, version: int, weights: list[Tensor]) -> None:
        self.versions[version] = weights

    def drop(self, version: int) -> None:
        self.versions.pop(version, None)

    def count(self) -> int:
        return len(self.versions)

    def param_bytes(self) -> int:
        """Bytes of the distinct storages of all live versions."""
        seen: dict[int, int] = {}
        for weights in self.versions.values():
            for w in weights:
                storage = w.untyped_storage()
                seen[storage.data_ptr()] = storage.nbytes()
        return sum(seen.values())
