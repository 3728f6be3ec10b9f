"""The pipeline/hybrid view of a model: its block profile plus what a stage boundary sends
(each block's output per sample) and what a hybrid shards (the nn.Linear layers of each block).

``worker/parallel_profile.py`` builds one from a workload; :func:`parallel_profile_of` reads
one from a shipped profile whose blocks carry those fields.
"""

from __future__ import annotations

from dataclasses import dataclass

from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.profiles import ModelProfile

FLOAT_BYTES = 4


@dataclass(frozen=True, slots=True)
class LinearLayer:
    block: int
    """1-based block holding the layer."""
    in_features: int
    out_features: int
    bias: bool = True

    @property
    def weight_bytes(self) -> int:
        return self.in_features * self.out_features * FLOAT_BYTES

    @property
    def bias_bytes(self) -> int:
        return self.out_features * FLOAT_BYTES if self.bias else 0

    @property
    def forward_flops_per_sample(self) -> float:
        return 2.0 * self.in_features * self.out_features


@dataclass(frozen=True, slots=True)
class ParallelProfile:
    """What the pipeline and hybrid formulas need beyond the block profile.

    ``output_bytes_per_sample[i]`` is block i+1's output (what a stage boundary sends);
    ``linear_layers`` are the nn.Linear layers with their block (what a hybrid shards).
    """

    blocks: ModelProfile
    output_bytes_per_sample: tuple[int, ...]
    linear_layers: tuple[LinearLayer, ...] = ()

    def __post_init__(self) -> None:
        if len(self.output_bytes_per_sample) != self.blocks.num_blocks:
            raise InvalidSpecError(
                f"{len(self.output_bytes_per_sample)} block outputs for a model of "
                f"{self.blocks.num_blocks} blocks",
                field="output_bytes_per_sample",
            )

    def linear_counts(self) -> tuple[int, ...]:
        counts = [0] * self.blocks.num_blocks
        for layer in self.linear_layers:
            counts[layer.block - 1] += 1
        return tuple(counts)


def parallel_profile_of(profile: ModelProfile) -> ParallelProfile | None:
    """The pipeline/hybrid view of a block profile, from the ``output_bytes_per_sample`` and
    ``linear_layers`` its blocks carry (bench/parallel_profile_fields.py writes them), or
    ``None`` when any block lacks its output size (analytic profiles, trace aliases)."""
    outputs = [b.output_bytes_per_sample for b in profile.blocks]
    if any(out is None for out in outputs):
        return None
    layers = tuple(
        LinearLayer(b.index, fan_in, fan_out, bias)
        for b in profile.blocks
        for fan_in, fan_out, bias in b.linear_layers
    )
    return ParallelProfile(profile, tuple(int(out or 0) for out in outputs), layers)
