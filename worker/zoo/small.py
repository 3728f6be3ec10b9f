"""Small models for the digits dataset: fast enough to train to convergence on a CPU, which is
what the statistical-efficiency (eta) runs need."""

from __future__ import annotations

from torch import nn
from torch.nn import functional

from worker.zoo.datasets import digits
from worker.zoo.workload import Workload

DIGIT_CLASSES = 10


def build_mlp(*, hidden: int = 128) -> Workload:
    """Four blocks: three Linear+ReLU hidden layers and the classifier (64 -> 10)."""
    blocks: list[nn.Module] = [
        nn.Sequential(nn.Linear(64, hidden), nn.ReLU()),
        nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU()),
        nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU()),
        nn.Linear(hidden, DIGIT_CLASSES),
    ]
    return Workload(
        name="mlp",
        blocks=blocks,
        block_names=["fc1", "fc2", "fc3", "classifier"],
        loss=functional.cross_entropy,
        make_data=lambda: digits(image=False),
        metric="accuracy",
        input_shape=(64,),
        description=f"4-block MLP 64-{hidden}-{hidden}-{hidden}-10 on sklearn digits",
    )


def _conv_bn(cin: int, cout: int) -> list[nn.Module]:
    return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]


def build_digits_cnn(*, width: int = 32) -> Workload:
    """Four blocks on 1x8x8 digits: conv (8x8), conv+pool (4x4), conv+pool (2x2), classifier.
    Uses BatchNorm so that the engine's BN handling is exercised by a model we can train."""
    blocks: list[nn.Module] = [
        nn.Sequential(*_conv_bn(1, width)),
        nn.Sequential(*_conv_bn(width, 2 * width), nn.MaxPool2d(2)),
        nn.Sequential(*_conv_bn(2 * width, 2 * width), nn.MaxPool2d(2)),
        nn.Sequential(nn.Flatten(), nn.Linear(2 * width * 4, DIGIT_CLASSES)),
    ]
    return Workload(
        name="digits_cnn",
        blocks=blocks,
        block_names=["conv1", "conv2_pool", "conv3_pool", "classifier"],
        loss=functional.cross_entropy,
        make_data=lambda: digits(image=True),
        metric="accuracy",
        input_shape=(1, 8, 8),
        description=f"4-block CNN (width {width}, BatchNorm) on sklearn digits 8x8",
    )
