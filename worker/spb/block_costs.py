"""Per-block cost profile of a workload: FLOPs, parameter bytes, saved-activation bytes, times.

FLOPs come from ``torch.utils.flop_counter.FlopCounterMode`` on the meta device (no compute,
so even VGG-16 at 224x224 is instant). For each block we count

- forward FLOPs;
- backward *weight-gradient* FLOPs: ``autograd.grad`` w.r.t. the block's parameters only;
- backward *input-gradient* FLOPs: (weights + input) minus weights only.

``backward_flops`` = weight + input for blocks 2..K and weight only for block 1, whose input
is data and never needs a gradient. The first block a partial worker trains (block ``d+1``)
doesn't need its input gradient either; consumers subtract ``backward_input_flops`` for it.
The loss function's own FLOPs are not included (negligible for every zoo model).

Saved-activation bytes are measured on the CPU with the engine's own
:class:`~worker.spb.instrumentation.SavedActivationMeter` (the input requires grad, as for any
block but the first trained one) and divided by the batch size.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import Tensor, nn
from torch.utils.flop_counter import FlopCounterMode

from worker.spb.instrumentation import SavedActivationMeter
from worker.zoo import Workload


@dataclass(frozen=True)
class BlockCost:
    index: int
    name: str
    forward_flops_per_sample: float
    backward_flops_per_sample: float
    backward_weight_flops_per_sample: float
    backward_input_flops_per_sample: float
    param_bytes: int
    activation_bytes_per_sample: int
    forward_time_s_per_sample: float | None = None
    backward_time_s_per_sample: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _flops(run: Any) -> float:
    with FlopCounterMode(display=False) as counter:
        run()
    return float(counter.get_total_flops())


def _differentiable(tensor: Tensor) -> Tensor:
    detached = tensor.detach()
    return detached.requires_grad_() if torch.is_floating_point(detached) else detached


def _grad(outputs: Tensor, inputs: Sequence[Tensor]) -> None:
    torch.autograd.grad(outputs, inputs, torch.ones_like(outputs), allow_unused=True)


def _block_flops(
    block: nn.Module, block_input: Tensor, differentiable_input: bool
) -> tuple[float, float, float, Tensor]:
    params = [p for p in block.parameters() if p.requires_grad]
    outputs: list[Tensor] = []
    forward = _flops(lambda: outputs.append(block(block_input)))
    out = outputs[0]
    weight = 0.0
    if params:
        # The counted region re-runs the forward (a fresh graph), so subtract it again.
        weight = _flops(lambda: _grad(block(block_input.detach()), params)) - forward
    both = weight
    if differentiable_input:
        both = _flops(lambda: _grad(out, [block_input, *params]))
    return forward, weight, both - weight, out


def count_flops(workload: Workload, batch: int = 2) -> list[tuple[float, float, float]]:
    """(forward, backward weight, backward input) FLOPs per sample for each block. The
    workload must have been built on the meta device."""
    hidden = workload.example_input(batch, "meta")
    result = []
    for index, block in enumerate(workload.blocks, start=1):
        block_input = _differentiable(hidden) if index > 1 else hidden.detach()
        forward, weight, input_grad, out = _block_flops(block, block_input, index > 1)
        result.append((forward / batch, weight / batch, input_grad / batch))
        hidden = out.detach()
    return result


def measure_block(
    block: nn.Module, block_input: Tensor, repeats: int
) -> tuple[int, float | None, float | None, Tensor]:
    """Saved-activation bytes, forward seconds and backward seconds (weights + input) for one
    block on real tensors; returns the block output too. ``repeats=0`` skips timing."""
    params = [p for p in block.parameters() if p.requires_grad]
    meter = SavedActivationMeter()
    meter.exclude(params)
    with meter:
        out = block(block_input)
    saved = meter.total_bytes
    if repeats == 0:
        return saved, None, None, out.detach()
    inputs = [t for t in (block_input,) if t.requires_grad] + params
    forward_times, backward_times = [], []
    for _ in range(repeats + 1):  # the first round warms caches and is discarded
        start = time.perf_counter()
        timed_out = block(block_input)
        middle = time.perf_counter()
        _grad(timed_out, inputs)
        end = time.perf_counter()
        forward_times.append(middle - start)
        backward_times.append(end - middle)
    return saved, min(forward_times[1:]), min(backward_times[1:]), out.detach()


def profile_workload(
    meta_workload: Workload, cpu_workload: Workload, batch: int, repeats: int
) -> list[BlockCost]:
    """Per-block costs. ``repeats=0`` leaves the measured times as None."""
    flops = count_flops(meta_workload)
    hidden = cpu_workload.example_input(batch, "cpu")
    costs = []
    for index, (block, name) in enumerate(
        zip(cpu_workload.blocks, cpu_workload.block_names, strict=True), start=1
    ):
        block.train()
        block_input = _differentiable(hidden) if index > 1 else hidden
        saved, fwd_s, bwd_s, hidden = measure_block(block, block_input, repeats)
        forward, weight, input_grad = flops[index - 1]
        costs.append(
            BlockCost(
                index=index,
                name=name,
                forward_flops_per_sample=forward,
                backward_flops_per_sample=weight + (input_grad if index > 1 else 0.0),
                backward_weight_flops_per_sample=weight,
                backward_input_flops_per_sample=input_grad if index > 1 else 0.0,
                param_bytes=sum(p.numel() * p.element_size() for p in block.parameters()),
                activation_bytes_per_sample=saved // batch,
                forward_time_s_per_sample=None if fwd_s is None else fwd_s / batch,
                backward_time_s_per_sample=None if bwd_s is None else bwd_s / batch,
            )
        )
    return costs
