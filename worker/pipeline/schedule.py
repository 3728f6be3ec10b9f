"""The order in which one stage runs forward (F) and backward (B) passes of micro-batches.

Micro-batches are numbered across batches: micro-batch ``j`` belongs to batch ``j // m``.

- ``one_f_one_b``: PipeDream's 1F1B without flushes. Stage ``s`` of ``S`` first runs
  ``S - s - 1`` warm-up forwards, then alternates one forward and one backward, then drains
  the remaining backwards. Consecutive batches overlap in the pipeline.
- ``gpipe``: per batch, every forward, then every backward, then the pipeline is flushed
  before the next batch starts (GPipe).
"""

from __future__ import annotations

from typing import Literal

Op = tuple[Literal["F", "B"], int]


def one_f_one_b(stage: int, num_stages: int, num_micro_batches: int) -> list[Op]:
    warmup = min(num_stages - stage - 1, num_micro_batches)
    ops: list[Op] = [("F", j) for j in range(warmup)]
    for i in range(num_micro_batches - warmup):
        ops.append(("F", warmup + i))
        ops.append(("B", i))
    ops.extend(("B", j) for j in range(num_micro_batches - warmup, num_micro_batches))
    return ops


def gpipe(num_batches: int, micro_batches: int) -> list[Op]:
    ops: list[Op] = []
    for batch in range(num_batches):
        first = batch * micro_batches
        ops.extend(("F", first + i) for i in range(micro_batches))
        ops.extend(("B", first + i) for i in range(micro_batches))
    return ops


def stage_schedule(
    schedule: str, stage: int, num_stages: int, num_batches: int, micro_batches: int
) -> list[Op]:
    if schedule == "2bw":
        return one_f_one_b(stage, num_stages, num_batches * micro_batches)
    return gpipe(num_batches, micro_batches)
