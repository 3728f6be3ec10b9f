"""VGG-16 in plain torch, cut into K=5 blocks: the five conv stages (each ends in a max-pool);
the classifier rides with stage 5.

``vgg16_224`` is the original ImageNet VGG-16 (no BatchNorm, 4096-4096-1000 classifier with
dropout, 138M parameters). ``vgg16_32`` is the usual CIFAR form (BatchNorm after every conv,
one 512->10 linear classifier), because plain VGG-16 barely trains from scratch at 32x32.
"""

from __future__ import annotations

from torch import nn
from torch.nn import functional

from worker.zoo.datasets import synthetic_images
from worker.zoo.workload import Workload

STAGES = ((64, 64), (128, 128), (256, 256, 256), (512, 512, 512), (512, 512, 512))


def _vgg(name: str, image_size: int) -> Workload:
    imagenet = image_size >= 64
    blocks: list[nn.Module] = []
    cin = 3
    for widths in STAGES:
        layers: list[nn.Module] = []
        for width in widths:
            layers.append(nn.Conv2d(cin, width, 3, padding=1, bias=True))
            if not imagenet:
                layers.append(nn.BatchNorm2d(width))
            layers.append(nn.ReLU())
            cin = width
        layers.append(nn.MaxPool2d(2))
        blocks.append(nn.Sequential(*layers))
    head: list[nn.Module]
    if imagenet:
        classes = 1000
        head = [
            nn.AdaptiveAvgPool2d(7),
            nn.Flatten(),
            nn.Linear(512 * 7 * 7, 4096),
            nn.ReLU(),
            nn.Dropout(0.5),
            nn.Linear(4096, 4096),
            nn.ReLU(),
            nn.Dropout(0.5),
            nn.Linear(4096, classes),
        ]
    else:
        classes = 10
        head = [nn.Flatten(), nn.Linear(512, classes)]
    blocks[-1] = nn.Sequential(blocks[-1], *head)
    shape = (3, image_size, image_size)
    return Workload(
        name=name,
        blocks=blocks,
        block_names=["stage1", "stage2", "stage3", "stage4", "stage5+classifier"],
        loss=functional.cross_entropy,
        make_data=lambda: synthetic_images(shape=shape, num_classes=classes),
        metric="accuracy",
        input_shape=shape,
        description=f"VGG-16 at {image_size}x{image_size}, 5 blocks (conv stages)",
    )


def build_vgg16_224() -> Workload:
    return _vgg("vgg16_224", 224)


def build_vgg16_32() -> Workload:
    return _vgg("vgg16_32", 32)
