"""``vgg16_32_fc``: VGG-16 (BatchNorm) at 32x32 with the original fully-connected classifier
(512 -> 4096 -> 4096 -> 10), the layout SplitBrain shards. The classifier is its own sixth
block, so a hybrid plan can shard exactly it and a pipeline can give it a stage of its own.

It trains on real data: scikit-learn's digits, upscaled from 8x8 to 32x32 (bilinear) and
repeated over three channels.

This is the zoo's model that does not fit a small per-worker memory limit under data
parallelism: 33.6M parameters, of which the classifier holds 18.9M (56%). With SGD and
momentum every data-parallel worker keeps weights, gradients and momentum for all of them
(about 404 MB before activations); sharding the classifier or giving it a pipeline stage of
its own cuts that per worker (docs/PARALLELISM.md has the measured figures).

No dropout in the classifier: hybrid workers compute the sharded blocks redundantly on the
global batch and would need identical dropout masks on every worker.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional

from worker.zoo.datasets import digits
from worker.zoo.vgg import STAGES
from worker.zoo.workload import DataSplits, TensorPairDataset, Workload

IMAGE = 32
HIDDEN = 4096
CLASSES = 10


def _upscale(dataset: object) -> TensorPairDataset:
    assert isinstance(dataset, TensorPairDataset)
    images = functional.interpolate(
        dataset.inputs, size=(IMAGE, IMAGE), mode="bilinear", align_corners=False
    )
    return TensorPairDataset(images.repeat(1, 3, 1, 1).contiguous(), dataset.targets)


def digits_32() -> DataSplits:
    """sklearn digits as 3x32x32 images (same split as ``digits``)."""
    small = digits(image=True)
    assert small.eval is not None
    return DataSplits(
        _upscale(small.train),
        _upscale(small.eval),
        small.description + ", upscaled to 3x32x32",
    )


def build_vgg16_32_fc(*, hidden: int = HIDDEN) -> Workload:
    blocks: list[nn.Module] = []
    cin = 3
    for widths in STAGES:
        layers: list[nn.Module] = []
        for width in widths:
            layers += [nn.Conv2d(cin, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU()]
            cin = width
        layers.append(nn.MaxPool2d(2))
        blocks.append(nn.Sequential(*layers))
    blocks.append(
        nn.Sequential(
            nn.Flatten(),
            nn.Linear(512, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, CLASSES),
        )
    )
    return Workload(
        name="vgg16_32_fc",
        blocks=blocks,
        block_names=["stage1", "stage2", "stage3", "stage4", "stage5", "classifier"],
        loss=functional.cross_entropy,
        make_data=digits_32,
        metric="accuracy",
        input_shape=(3, IMAGE, IMAGE),
        make_example_input=lambda batch, device: torch.rand(batch, 3, IMAGE, IMAGE, device=device),
        description=f"VGG-16-BN at 32x32 with a 512-{hidden}-{hidden}-10 classifier "
        "(6 blocks) on sklearn digits upscaled to 32x32",
    )
