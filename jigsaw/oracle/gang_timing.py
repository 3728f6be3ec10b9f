"""What the co-location model knows of one gang: its iteration time alone, the compute seconds
one iteration spends on each of its GPUs, and (for concurrent sharing) the job's sharing
profile."""

from __future__ import annotations

from dataclasses import dataclass

from jigsaw.model.cluster import GpuId


@dataclass(frozen=True, slots=True)
class SharingProfile:
    """Per-iteration figures of a job alone that concurrent sharing is predicted from
    (:mod:`jigsaw.oracle.colocation_concurrent`). They do not depend on the plan or the
    placement: an SPB partial worker shares as its job does, for the share of the time it
    computes (its duty cycle)."""

    flops_per_iteration: float
    """Forward + backward FLOPs of one worker's full-backprop iteration."""
    memory_share: float
    """One worker's memory footprint as a share of the GPU's memory."""
    traffic_bytes_per_iteration: float
    """Bytes one iteration moves through GPU memory (weights, gradients, optimizer state,
    activations written and read back)."""

    def __post_init__(self) -> None:
        if not self.flops_per_iteration > 0 or not self.traffic_bytes_per_iteration > 0:
            raise ValueError("a sharing profile needs positive FLOPs and traffic")
        if not self.memory_share >= 0:
            raise ValueError("a sharing profile's memory share must be >= 0")


@dataclass(frozen=True, slots=True)
class GangTiming:
    """One gang's iteration time alone and its compute seconds per iteration on each GPU."""

    alone_s: float
    busy_s: tuple[tuple[GpuId, float], ...]
    profile: SharingProfile | None = None
    """``None``: unknown (concurrent sharing then prices the gang as time-slicing would)."""

    def __post_init__(self) -> None:
        if not self.alone_s > 0:
            raise ValueError("a gang's iteration time alone must be positive")
