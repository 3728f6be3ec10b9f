"""What a job can do at each size it may take: its speedup over its fair share, and the batch.

Sized from the goodput source (the job's agent's reports, :mod:`jigsaw.goodput.source`) as
Pollux sizes jobs: the step-time model fitted to the shapes it ran and its gradient noise, at
the goodput-optimal batch per size; a job may take at most twice the most GPUs it has
measured. A job the source knows nothing of (rigid, or ``knowledge = oracle``) keeps the size
it asked for and counts as scaling linearly: only its presence is decided.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from jigsaw.goodput.model import compact_nodes
from jigsaw.goodput.source import JobGoodput
from jigsaw.model.cluster import Placement
from jigsaw.model.domain import Job
from jigsaw.model.lifecycle import JobState

MAX_NODES_PER_JOB = 16
"""As Pollux: no job spreads over more nodes than this."""


@dataclass(frozen=True, slots=True)
class SizeChoices:
    """The sizes a job may take this round (0 always among them), ascending, and the speedup
    at each (0 at size 0)."""

    sizes: NDArray[np.int64]
    speedups: NDArray[np.float64]


def allowed_sizes(
    job: Job, goodput: JobGoodput | None, capacity: int, per_node: int, powers: bool
) -> list[int]:
    """Pollux's allowed sizes: 0, and either the size the job holds (starting this round),
    the size it asked for (nothing known), or ``min_workers`` up to twice its largest
    measured size within its limits; ``powers`` keeps only powers of two, the current size
    and the range's ends."""
    current = len(job.placement) if job.state.holds_resources else 0
    if job.state is JobState.ADMITTED:
        return sorted({0, current})
    if goodput is None:
        return [0, job.spec.workers] if 0 < job.spec.workers <= capacity else [0]
    low, high = job.spec.worker_range
    explored = max(2 * goodput.largest_measured, 1)
    cap = min(high, explored, goodput.limits.max_replicas(), capacity, MAX_NODES_PER_JOB * per_node)
    first, last = max(low, 1), max(cap, min(low, capacity))
    sizes = list(range(first, last + 1))
    if powers:
        keep = {first, last, current}
        sizes = [n for n in sizes if n in keep or n & (n - 1) == 0]
    return [0, *sizes]


def size_choices(
    job: Job,
    goodput: JobGoodput | None,
    sizes: list[int],
    fair_share: int,
    per_node: int,
) -> SizeChoices:
    array = np.asarray(sizes, dtype=np.int64)
    linear = array / fair_share
    model = goodput.model if goodput is not None else None
    if model is None:
        return SizeChoices(array, linear)
    current: Placement = job.placement if job.state.holds_resources else ()
    replicas = np.maximum(array, 1)
    nodes = np.array([compact_nodes(int(n), per_node) for n in replicas])
    if current:
        nodes[array == len(current)] = len({gpu[0] for gpu in current})
    values, _, _ = model.best_many(nodes, replicas)
    base = model.best(1, fair_share).goodput
    if base <= 0:
        return SizeChoices(array, linear)
    return SizeChoices(array, np.where(array > 0, values / base, 0.0))


def worker_batch(job: Job, goodput: JobGoodput | None, placement: Placement) -> int | None:
    """Samples per worker on ``placement``: the goodput-optimal batch on its nodes, the
    smallest the size allows before anything is measured (as Pollux starts), the global
    batch split for a fixed one; ``None`` for a job the source does not know."""
    if goodput is None:
        return None
    spec, workers = job.spec, len(placement)
    if spec.batch_policy == "fixed":
        return spec.global_batch // workers
    if goodput.model is not None:
        choice = goodput.model.best(len({gpu[0] for gpu in placement}), workers)
        if choice.goodput > 0:
            return choice.worker_batch
    limits = goodput.limits
    smallest = max(limits.min_batch, limits.min_local * workers)
    return math.ceil(smallest / workers)
