"""Build the oracle's :class:`~jigsaw.oracle.parallel_profile.ParallelProfile` from a workload:
block costs (worker/spb/block_costs.py), each block's output size (what a pipeline stage
boundary sends) and the linear layers a hybrid plan can shard."""

from __future__ import annotations

import platform

import torch
from torch import nn

from jigsaw.model.profiles import ModelProfile
from jigsaw.oracle.parallel_profile import FLOAT_BYTES, LinearLayer, ParallelProfile
from jigsaw.oracle.profile_catalog import parse_profile
from worker.spb.block_costs import profile_workload
from worker.zoo import Workload, load_workload


def linear_layers(workload: Workload) -> tuple[LinearLayer, ...]:
    return tuple(
        LinearLayer(index, m.in_features, m.out_features, m.bias is not None)
        for index, block in enumerate(workload.blocks, start=1)
        for m in block.modules()
        if isinstance(m, nn.Linear)
    )


def output_bytes_per_sample(workload: Workload, batch: int = 2) -> tuple[int, ...]:
    sizes: list[int] = []
    with torch.no_grad():
        x = workload.example_input(batch)
        for block in workload.blocks:
            block.eval()
            x = block(x)
            block.train()
            sizes.append(x[0].numel() * FLOAT_BYTES)
    return tuple(sizes)


def measured_block_profile(model: str, batch: int = 8, repeats: int = 2) -> ModelProfile:
    """Profile on this CPU now, with the calling process's intra-op thread count."""
    with torch.device("meta"):
        meta = load_workload(model)
    cpu = load_workload(model)
    costs = profile_workload(meta, cpu, batch=batch, repeats=repeats)
    document = {
        "model": model,
        "profiled_batch_size": batch,
        "device": f"cpu ({platform.machine()}, {torch.get_num_threads()} intra-op threads)",
        "blocks": [cost.as_dict() for cost in costs],
    }
    return parse_profile(document, f"measured now ({model})")


def parallel_profile(model: str, blocks: ModelProfile) -> ParallelProfile:
    workload = load_workload(model)
    return ParallelProfile(blocks, output_bytes_per_sample(workload), linear_layers(workload))
