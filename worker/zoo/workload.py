"""What a trainable workload is: an ordered list of blocks, a loss and a data factory.

Everything the SPB engine needs to know about a model lives in :class:`Workload`. Zoo models
(listed in :mod:`worker.zoo.registry`) and user entrypoints (``package.module:function``) both
return one; see docs/MODELS.md.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import torch
from torch import Tensor, nn

from jigsaw.model.errors import InvalidSpecError

Metric = Literal["accuracy", "loss"]
LossFn = Callable[[Tensor, Tensor], Tensor]


class SampleDataset(Protocol):
    """Map-style dataset. ``fetch`` returns a whole batch at once (inputs, targets)."""

    def __len__(self) -> int: ...

    def fetch(self, indices: Tensor) -> tuple[Tensor, Tensor]: ...


@dataclass(frozen=True)
class TensorPairDataset:
    """In-memory dataset of (input, target) rows; ``fetch`` is one fancy-index per tensor."""

    inputs: Tensor
    targets: Tensor

    def __post_init__(self) -> None:
        if len(self.inputs) != len(self.targets):
            raise InvalidSpecError(
                f"inputs have {len(self.inputs)} rows but targets have {len(self.targets)}",
                field="dataset",
            )

    def __len__(self) -> int:
        return len(self.inputs)

    def fetch(self, indices: Tensor) -> tuple[Tensor, Tensor]:
        return self.inputs[indices], self.targets[indices]


@dataclass(frozen=True)
class DataSplits:
    train: SampleDataset
    eval: SampleDataset | None = None
    description: str = ""


def _float_example(shape: Sequence[int]) -> Callable[[int, torch.device], Tensor]:
    def make(batch: int, device: torch.device) -> Tensor:
        return torch.randn(batch, *shape, device=device)

    return make


@dataclass
class Workload:
    """A model cut into ``len(blocks)`` blocks (input side first), its loss and its data.

    ``make_data`` is called lazily so that building a model (e.g. for profiling on the meta
    device) never materialises a dataset.
    """

    name: str
    blocks: list[nn.Module]
    block_names: list[str]
    loss: LossFn
    make_data: Callable[[], DataSplits]
    metric: Metric
    input_shape: tuple[int, ...]
    make_example_input: Callable[[int, torch.device], Tensor] | None = None
    description: str = ""
    options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.blocks:
            raise InvalidSpecError(f"workload {self.name!r} has no blocks", field="model")
        if len(self.block_names) != len(self.blocks):
            raise InvalidSpecError(
                f"workload {self.name!r} names {len(self.block_names)} blocks "
                f"but has {len(self.blocks)}",
                field="model",
            )
        if self.metric not in ("accuracy", "loss"):
            raise InvalidSpecError(
                f"metric must be 'accuracy' or 'loss', got {self.metric!r}", field="model"
            )
        if self.make_example_input is None:
            self.make_example_input = _float_example(self.input_shape)

    @property
    def num_blocks(self) -> int:
        return len(self.blocks)

    def example_input(self, batch: int, device: torch.device | str = "cpu") -> Tensor:
        assert self.make_example_input is not None  # set in __post_init__
        # A private, seeded stream: a thread-simulated peer may be drawing its initial weights
        # from torch's global RNG under GLOBAL_RNG_LOCK right now, and an unlocked draw here
        # would shift them (replicas that should be identical then differ).
        with GLOBAL_RNG_LOCK, torch.random.fork_rng(devices=[]):
            torch.manual_seed(EXAMPLE_INPUT_SEED)
            return self.make_example_input(batch, torch.device(device))

    def forward(self, inputs: Tensor) -> Tensor:
        """Full forward pass through every block (evaluation, references)."""
        out = inputs
        for block in self.blocks:
            out = block(out)
        return out

    def parameters(self) -> list[nn.Parameter]:
        return [p for block in self.blocks for p in block.parameters()]


WorkloadBuilder = Callable[..., Workload]
# Builders draw initial weights from torch's global RNG; ranks simulated as threads of one
# process must not interleave those draws, or their "identical" replicas would differ.
# Re-entrant: a builder may ask a workload for an example input while it holds the lock.
GLOBAL_RNG_LOCK = threading.RLock()
EXAMPLE_INPUT_SEED = 0
