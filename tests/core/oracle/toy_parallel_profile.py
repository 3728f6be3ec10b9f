"""A toy model for the plan-type tests: 4 blocks whose last holds a large linear layer
(SplitBrain's case), on an 8-GPU CPU node with no per-iteration overhead."""

from __future__ import annotations

from jigsaw.model.hardware import preset, with_overrides
from jigsaw.model.profiles import MEASURED, BlockProfile, ModelProfile
from jigsaw.oracle.parallel_profile import LinearLayer, ParallelProfile

HW = with_overrides(preset("cpu"), gpus_per_node=8, iteration_overhead_s=0.0)
MB = 1_000_000
# A model whose last block holds a large linear layer (SplitBrain's case) and whose
# parameters dominate memory: 4 blocks, 40 MB of parameters in block 4.
PARAMS = (1 * MB, 1 * MB, 1 * MB, 40 * MB)


def toy() -> ParallelProfile:
    blocks = tuple(
        BlockProfile(i + 1, f"b{i + 1}", 1e6, 2e6, PARAMS[i], 1000, 1e-4, 2e-4) for i in range(4)
    )
    model = ModelProfile("toy", blocks, MEASURED, 16, "cpu (test)")
    return ParallelProfile(model, (4000, 4000, 4000, 40), (LinearLayer(4, 2500, 4000),))
