"""Seeded model assignment for traces that record only GPU counts (Philly).

Each job gets a zoo model drawn from a mix that depends on its GPU-count class: small jobs
train small models, large gangs train the large ones (the pattern Jeon et al., ATC 2019,
report for Philly: multi-GPU jobs are the long, large-model ones). The weights are our
assumption, documented in docs/ORACLE.md ("Philly model mix"). The draw for a job depends
only on (seed, line number), so filtering a window never changes another job's model.
"""

from __future__ import annotations

import zlib

GPU_CLASS_MIX: tuple[tuple[int, tuple[tuple[str, float], ...]], ...] = (
    # (smallest GPU count of the class, ((model, weight), ...))
    (
        1,
        (
            ("mlp", 0.10),
            ("digits_cnn", 0.10),
            ("resnet18_32", 0.30),
            ("resnet50_32", 0.20),
            ("resnet18_224", 0.15),
            ("gpt_small", 0.15),
        ),
    ),
    (
        2,
        (
            ("resnet18_32", 0.20),
            ("resnet50_32", 0.20),
            ("resnet18_224", 0.20),
            ("resnet50_224", 0.20),
            ("gpt_small", 0.20),
        ),
    ),
    (8, (("resnet18_224", 0.15), ("resnet50_224", 0.35), ("vgg16_224", 0.20), ("gpt_small", 0.30))),
)


def mix_for(num_gpus: int) -> tuple[tuple[str, float], ...]:
    chosen = GPU_CLASS_MIX[0][1]
    for smallest, mix in GPU_CLASS_MIX:
        if num_gpus >= smallest:
            chosen = mix
    return chosen


def assign_model(num_gpus: int, line: int, seed: int) -> str:
    """The model of the job on ``line``: a uniform draw from crc32(seed, line), cut by mix."""
    draw = zlib.crc32(f"{seed}:{line}".encode()) / 2**32
    mix = mix_for(num_gpus)
    total = sum(weight for _, weight in mix)
    cumulative = 0.0
    for model, weight in mix:
        cumulative += weight / total
        if draw < cumulative:
            return model
    return mix[-1][0]
