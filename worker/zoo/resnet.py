"""ResNet-18/50 in plain torch, cut into K=4 blocks at the four residual stages.

Block 1 = stem + stage 1, blocks 2-3 = stages 2-3, block 4 = stage 4 + pooling + classifier.
Stage boundaries are where the activation shape changes, so each block's saved-activation and
FLOP cost is a clean, documented unit. ``*_32`` variants are the CIFAR form (3x3 stem, no
max-pool, 10 classes); ``*_224`` variants are the ImageNet form (7x7 stem, max-pool, 1000).
Data is synthetic: these models are for throughput, memory and traffic measurements.
"""

from __future__ import annotations

from torch import Tensor, nn
from torch.nn import functional

from worker.zoo.datasets import synthetic_images
from worker.zoo.workload import Workload


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin: int, width: int, stride: int) -> None:
        super().__init__()
        cout = width * self.expansion
        self.conv1 = nn.Conv2d(cin, width, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = _shortcut(cin, cout, stride)

    def forward(self, x: Tensor) -> Tensor:
        out = functional.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return functional.relu(out + self.shortcut(x))


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin: int, width: int, stride: int) -> None:
        super().__init__()
        cout = width * self.expansion
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.shortcut = _shortcut(cin, cout, stride)

    def forward(self, x: Tensor) -> Tensor:
        out = functional.relu(self.bn1(self.conv1(x)))
        out = functional.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return functional.relu(out + self.shortcut(x))


def _shortcut(cin: int, cout: int, stride: int) -> nn.Module:
    if stride == 1 and cin == cout:
        return nn.Identity()
    return nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))


def _stage(
    unit: type[BasicBlock] | type[Bottleneck], cin: int, width: int, count: int, stride: int
) -> tuple[nn.Sequential, int]:
    layers: list[nn.Module] = []
    for i in range(count):
        layers.append(unit(cin, width, stride if i == 0 else 1))
        cin = width * unit.expansion
    return nn.Sequential(*layers), cin


def _resnet(name: str, depth: int, image_size: int) -> Workload:
    unit: type[BasicBlock] | type[Bottleneck]
    if depth == 18:
        unit, counts = BasicBlock, (2, 2, 2, 2)
    else:
        unit, counts = Bottleneck, (3, 4, 6, 3)
    imagenet = image_size >= 64
    classes = 1000 if imagenet else 10
    stem: list[nn.Module]
    if imagenet:
        stem = [
            nn.Conv2d(3, 64, 7, 2, 3, bias=False),
            nn.BatchNorm2d(64),
            nn.ReLU(),
            nn.MaxPool2d(3, 2, 1),
        ]
    else:
        stem = [nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU()]
    cin = 64
    stages = []
    for i, (count, width) in enumerate(zip(counts, (64, 128, 256, 512), strict=True)):
        stage, cin = _stage(unit, cin, width, count, 1 if i == 0 else 2)
        stages.append(stage)
    blocks: list[nn.Module] = [
        nn.Sequential(*stem, stages[0]),
        stages[1],
        stages[2],
        nn.Sequential(stages[3], nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)),
    ]
    shape = (3, image_size, image_size)
    return Workload(
        name=name,
        blocks=blocks,
        block_names=["stem+stage1", "stage2", "stage3", "stage4+head"],
        loss=functional.cross_entropy,
        make_data=lambda: synthetic_images(shape=shape, num_classes=classes),
        metric="accuracy",
        input_shape=shape,
        description=f"ResNet-{depth} at {image_size}x{image_size}, 4 blocks (residual stages)",
    )


def build_resnet18_32() -> Workload:
    return _resnet("resnet18_32", 18, 32)


def build_resnet18_224() -> Workload:
    return _resnet("resnet18_224", 18, 224)


def build_resnet50_32() -> Workload:
    return _resnet("resnet50_32", 50, 32)


def build_resnet50_224() -> Workload:
    return _resnet("resnet50_224", 50, 224)
