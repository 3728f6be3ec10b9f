"""``digits_wide_mlp``: a wide fully-connected network on sklearn digits that does not fit a
small per-worker memory limit under data parallelism, and does under a pipeline or a hybrid
plan over four workers. The CPU demo of issue 16's "a model that needs it".

Six linear layers of width 2560 (26.4M parameters, 106 MB of float32 weights) in four blocks of
about one 2560x2560 layer each, so four pipeline stages hold near-equal shares::

    fc1_fc2        64 -> 2560 -> 2560   (6.72M parameters)
    fc3            2560 -> 2560         (6.56M)
    fc4            2560 -> 2560         (6.56M)
    fc5_classifier 2560 -> 2560 -> 10   (6.58M)

With SGD and momentum a data-parallel worker holds weights, gradients and momentum for all of
them: 317 MB (0.295 GiB) before activations, over a 0.25 GiB limit. A 2BW pipeline stage of
one block holds two weight versions, a gradient and momentum of its block (about 0.1 GiB); a
hybrid worker holds a quarter of every sharded layer. docs/BENCHMARKS.md has the measured
figures.

He (Kaiming) initialisation keeps the signal alive through six ReLU layers (PyTorch's default
init shrinks it and the network barely learns in its first 30 iterations); learning rates
0.01 to 0.05 reach above 0.9 held-out accuracy within 30 to 40 iterations of a 128-sample
global batch.
"""

from __future__ import annotations

from torch import nn
from torch.nn import functional

from worker.zoo.datasets import digits
from worker.zoo.workload import Workload

WIDTH = 2560
CLASSES = 10


def _linear(cin: int, cout: int) -> nn.Linear:
    layer = nn.Linear(cin, cout)
    nn.init.kaiming_normal_(layer.weight, nonlinearity="relu")
    nn.init.zeros_(layer.bias)
    return layer


def build_digits_wide_mlp(*, width: int = WIDTH) -> Workload:
    blocks: list[nn.Module] = [
        nn.Sequential(_linear(64, width), nn.ReLU(), _linear(width, width), nn.ReLU()),
        nn.Sequential(_linear(width, width), nn.ReLU()),
        nn.Sequential(_linear(width, width), nn.ReLU()),
        nn.Sequential(_linear(width, width), nn.ReLU(), nn.Linear(width, CLASSES)),
    ]
    return Workload(
        name="digits_wide_mlp",
        blocks=blocks,
        block_names=["fc1_fc2", "fc3", "fc4", "fc5_classifier"],
        loss=functional.cross_entropy,
        make_data=lambda: digits(image=False),
        metric="accuracy",
        input_shape=(64,),
        description=f"wide MLP 64-{width}x5-10 (4 blocks) on sklearn digits",
    )
