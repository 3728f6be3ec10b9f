"""Placement-free costs of one (model, batch, plan): compute, memory, gradient groups, bytes.

Everything here is plain Python floats: the arrays are a handful of blocks long, where numpy's
per-call overhead costs more than it saves.
"""

from __future__ import annotations

from dataclasses import dataclass

from jigsaw.model.hardware import HardwareSpec
from jigsaw.model.profiles import ModelProfile
from jigsaw.oracle.memory import worker_memory


@dataclass(frozen=True, slots=True)
class ModelCosts:
    """Per-(model, local batch) prefix sums, indexed by stop depth ``d`` in 0..K-1."""

    num_blocks: int
    compute_s: tuple[float, ...]
    """Forward over all blocks + backward over blocks d+1..K + fixed overhead."""
    memory_bytes: tuple[int, ...]
    block_param_bytes: tuple[int, ...]
    """Index 0 is block 1."""


@dataclass(frozen=True, slots=True)
class GradientGroup:
    """Blocks sharing one contributor set ``C = rank_order[:contributors]``."""

    contributors: int
    param_bytes: int


@dataclass(frozen=True, slots=True)
class PlanCosts:
    compute_s: tuple[float, ...]
    memory_bytes: tuple[int, ...]
    bytes_sent: tuple[int, ...]
    rank_order: tuple[int, ...]
    groups: tuple[GradientGroup, ...]


def model_costs(profile: ModelProfile, batch_size: int, hardware: HardwareSpec) -> ModelCosts:
    blocks = profile.blocks
    if profile.has_times_for(hardware.name):
        forward = [b.forward_time_s_per_sample or 0.0 for b in blocks]
        backward = [b.backward_time_s_per_sample or 0.0 for b in blocks]
    else:
        rate = hardware.effective_flops
        forward = [b.forward_flops_per_sample / rate for b in blocks]
        backward = [b.backward_flops_per_sample / rate for b in blocks]
    k = len(blocks)
    forward_all = batch_size * sum(forward)
    params = sum(b.param_bytes for b in blocks)
    # Every worker holds all weights, and -- because every worker applies the same update to
    # every block -- a gradient buffer and optimizer state for all blocks too: the memory of
    # a worker with no activations.
    model_state = worker_memory(params).model_bytes
    compute: list[float] = []
    memory: list[int] = []
    for depth in range(k):
        suffix = blocks[depth:]
        backward_suffix = batch_size * sum(backward[depth:])
        activations = batch_size * sum(b.activation_bytes_per_sample for b in suffix)
        compute.append(hardware.iteration_overhead_s + forward_all + backward_suffix)
        memory.append(model_state + activations + hardware.workspace_bytes)
    return ModelCosts(k, tuple(compute), tuple(memory), tuple(b.param_bytes for b in blocks))


def plan_costs(costs: ModelCosts, depths: tuple[int, ...]) -> PlanCosts:
    n = len(depths)
    order = tuple(sorted(range(n), key=lambda r: (depths[r], r)))
    # Contributors of block b (1-based) are the ranks with depth < b: a prefix of ``order``.
    by_count: dict[int, int] = {}
    for block in range(1, costs.num_blocks + 1):
        count = sum(1 for d in depths if d < block)
        by_count[count] = by_count.get(count, 0) + costs.block_param_bytes[block - 1]
    groups = tuple(GradientGroup(c, p) for c, p in sorted(by_count.items(), reverse=True))
    sent = [0.0] * n
    for group in groups:
        c, size = group.contributors, group.param_bytes
        if c > 1:
            for rank in order[:c]:
                sent[rank] += 2.0 * (c - 1) / c * size
        if c < n:
            # Pipelined chain broadcast: root -> each non-contributor, last one only receives.
            chain = (order[0], *order[c:])
            for rank in chain[:-1]:
                sent[rank] += size
    return PlanCosts(
        compute_s=tuple(costs.compute_s[d] for d in depths),
        memory_bytes=tuple(costs.memory_bytes[d] for d in depths),
        bytes_sent=tuple(int(b) for b in sent),
        rank_order=order,
        groups=groups,
    )
