"""A workload entrypoint that hangs once, for the heartbeat test (``package.module:function``
models are loaded by the actors exactly as a user's would be)."""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import torch
from torch import Tensor, nn

from worker.zoo.small import build_mlp
from worker.zoo.workload import Workload

MARKER = Path(tempfile.gettempdir()) / "jigsaw-runtime-tests" / "hang-once"
HANG_AT_CALL = 30


def arm_hang() -> None:
    MARKER.parent.mkdir(parents=True, exist_ok=True)
    MARKER.touch()


class HangOnce(nn.Module):
    """Passes inputs through; on rank 1's 30th training call, sleeps for an hour if armed."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, inputs: Tensor) -> Tensor:
        if self.training:
            self.calls += 1
            rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
            if rank == 1 and self.calls == HANG_AT_CALL and MARKER.exists():
                MARKER.unlink()
                time.sleep(3600)
        return inputs


def hang_once_mlp() -> Workload:
    workload = build_mlp()
    workload.blocks[0] = nn.Sequential(HangOnce(), workload.blocks[0])
    return workload


PACE_S = 0.1


class Pace(nn.Module):
    """Sleeps ``PACE_S`` per training forward: caps a job at ~10 iterations/s on any machine,
    so a test knows it is still running at a given time (sleeping costs no CPU)."""

    def forward(self, inputs: Tensor) -> Tensor:
        if self.training:
            time.sleep(PACE_S)
        return inputs


def paced_mlp() -> Workload:
    workload = build_mlp()
    workload.blocks[0] = nn.Sequential(Pace(), workload.blocks[0])
    return workload


def needs_a_width(width: int) -> Workload:
    """An entrypoint with the wrong signature: the workers call builders with no argument."""
    del width
    return build_mlp()


SHARDS_MISSING = "no shard files under /data/digits-shards"


def prints_then_raises() -> Workload:
    """A builder that says what it does, warns, then raises (a user's data is not there)."""
    print("loading shards from /data/digits-shards", flush=True)
    print("warning: shard index is stale", file=sys.stderr, flush=True)
    raise FileNotFoundError(SHARDS_MISSING)
