"""A user-supplied model, exactly as docs/MODELS.md describes it.

Submit it with ``model: worker.zoo.examples.tiny_regression:build``. Your own module only needs
to be importable on the workers (installed, or on PYTHONPATH).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional

from worker.zoo import DataSplits, TensorPairDataset, Workload


def make_data(samples: int = 512, features: int = 16) -> DataSplits:
    # Data must be a deterministic function of its arguments: every rank builds it itself.
    generator = torch.Generator().manual_seed(1234)
    inputs = torch.randn(samples, features, generator=generator)
    true_weights = torch.randn(features, 1, generator=generator)
    targets = inputs @ true_weights + 0.1 * torch.randn(samples, 1, generator=generator)
    cut = samples * 4 // 5
    return DataSplits(
        train=TensorPairDataset(inputs[:cut], targets[:cut]),
        eval=TensorPairDataset(inputs[cut:], targets[cut:]),
        description="noisy linear regression",
    )


def build(hidden: int = 32) -> Workload:
    """Called once per rank under a fixed torch seed, so initial weights match everywhere."""
    return Workload(
        name="tiny_regression",
        blocks=[
            nn.Sequential(nn.Linear(16, hidden), nn.Tanh()),
            nn.Sequential(nn.Linear(hidden, hidden), nn.Tanh()),
            nn.Linear(hidden, 1),
        ],
        block_names=["encoder", "hidden", "readout"],
        loss=functional.mse_loss,
        make_data=make_data,
        metric="loss",
        input_shape=(16,),
    )
