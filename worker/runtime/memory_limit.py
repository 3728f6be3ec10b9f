"""The per-worker memory limit (``JIGSAW_WORKER_MEMORY_GIB``): CPUs have no GPU memory to run
out of, so this cap is the CPU stand-in for a CUDA out-of-memory error.

A worker holds its parameters (every weight version it keeps), gradients, optimizer state and
saved activations. The actor checks the gang against the limit twice: before the first step
from the model's size (no activations yet), and after the first step from what the engine
measured. Every rank takes part (a MAX all-reduce), so all fail together with the same reason,
and the failure is not retried: the same model under the same plan needs the same memory.
"""

from __future__ import annotations

from jigsaw.model.errors import JigsawError
from jigsaw.model.numerics import GIB


class WorkerMemoryExceeded(JigsawError):
    """A worker needs more memory than the per-worker limit allows (not retryable)."""


def limit_bytes(limit_gib: float | None) -> int | None:
    return None if limit_gib is None else int(limit_gib * GIB)


def check_worker_memory(needed: int, limit: int | None, when: str) -> None:
    """Raise :class:`WorkerMemoryExceeded` when ``needed`` bytes exceed ``limit``."""
    if limit is None or needed <= limit:
        return
    raise WorkerMemoryExceeded(
        f"needs {needed / GIB:.3g} GiB per worker ({when}), limit {limit / GIB:.3g} GiB "
        "(JIGSAW_WORKER_MEMORY_GIB): use parallelism: pipeline or hybrid"
    )
