"""Goodput of a data-parallel job at a size, and the batch that maximises it.

A job on ``replicas`` workers over ``nodes`` nodes runs a global batch ``B`` as ``replicas``
workers x ``accum + 1`` micro-batches of ``atomic`` samples (``B = replicas x atomic x (accum +
1)``): gradient accumulation lets the batch grow past what one worker holds at once. Its
goodput is samples/s x :meth:`GradientNoise.efficiency`. :meth:`GoodputModel.best` searches 50
global batches, geometrically spaced over the job's limits, as Pollux's agent does, and
returns the best split.

An SPB plan is priced on the same scale: ``goodput = samples/s x E(batch) x eta(plan)``
(:meth:`GoodputModel.with_eta`; :func:`jigsaw.goodput.spb.with_plan_eta` finds the job's eta).
The step time is the full-backprop one: the rank that trains every block sets the pace, so
SPB never shortens an iteration (docs/DESIGN.md), it only frees its partial ranks' slack.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from jigsaw.goodput.noise import GradientNoise
from jigsaw.goodput.step_time import StepTimeModel

CANDIDATE_BATCHES = 50
_EPS = 1e-8
"""Tolerance of the ceilings: a local batch of 64.0000001 samples is 64."""


@dataclass(frozen=True, slots=True)
class BatchLimits:
    """What a job allows: global batches ``min_batch..max_batch``, micro-batches of
    ``min_local..max_local`` samples per worker (memory bounds the upper one), and whether it
    may accumulate gradients over several micro-batches."""

    min_batch: int
    max_batch: int
    min_local: int
    max_local: int
    accumulation: bool = True

    def __post_init__(self) -> None:
        if not 1 <= self.min_batch <= self.max_batch:
            raise ValueError(f"need 1 <= min_batch <= max_batch, got {self}")
        if not 1 <= self.min_local <= self.max_local:
            raise ValueError(f"need 1 <= min_local <= max_local, got {self}")

    @property
    def fixed(self) -> bool:
        return self.min_batch == self.max_batch

    def max_replicas(self) -> int:
        """The most workers that each still get a micro-batch of at least ``min_local``."""
        return max(1, self.max_batch // self.min_local)


@dataclass(frozen=True, slots=True)
class BatchChoice:
    goodput: float
    """Samples per second x efficiency (0: no valid split at this size)."""
    atomic: int
    """Samples per micro-batch per worker."""
    accum: int
    """Extra micro-batches accumulated before each synchronisation."""

    @property
    def worker_batch(self) -> int:
        """Samples each worker takes per iteration."""
        return self.atomic * (self.accum + 1)


class GoodputModel:
    """One job's goodput: its step times, its gradient noise (``None`` until it has
    reported any: it then runs the smallest batch its size allows, as Pollux does) and its
    limits. ``reference`` is the batch efficiency is measured against (any constant gives
    the same choices). ``eta`` is the statistical efficiency of the SPB plan it runs (1: full
    backprop); every goodput is multiplied by it."""

    def __init__(
        self,
        step_times: StepTimeModel,
        noise: GradientNoise | None,
        limits: BatchLimits,
        *,
        eta: float = 1.0,
    ) -> None:
        if not 0.0 < eta <= 1.0:
            raise ValueError(f"eta must be in (0, 1], got {eta}")
        self.step_times = step_times
        self.noise = noise
        self.limits = limits
        self.eta = eta
        self.reference = float(limits.min_batch)

    def with_eta(self, eta: float) -> GoodputModel:
        """The same job under an SPB plan of statistical efficiency ``eta`` in (0, 1]: the same
        step times and batch choice, every goodput times ``eta``. An SPB-host configuration
        and an exclusive one of the same job then compare on one scale."""
        return GoodputModel(self.step_times, self.noise, self.limits, eta=eta)

    def goodput(
        self, nodes: ArrayLike, replicas: ArrayLike, atomic: ArrayLike, accum: ArrayLike
    ) -> NDArray[np.float64]:
        r = np.asarray(replicas, dtype=np.float64)
        a = np.asarray(atomic, dtype=np.float64)
        k = np.asarray(accum, dtype=np.float64)
        batch = r * a * (k + 1.0)
        samples_per_s = self.eta * batch / self.step_times.iteration_s(nodes, r, a, k)
        if self.noise is None:
            return samples_per_s
        result: NDArray[np.float64] = samples_per_s * self.noise.efficiency(batch, self.reference)
        return result

    def best(self, nodes: int, replicas: int) -> BatchChoice:
        """The goodput-optimal split at this size (goodput 0 when none is valid)."""
        goodput, atomic, accum = self.best_many(np.array([nodes]), np.array([replicas]))
        return BatchChoice(float(goodput[0]), int(atomic[0]), int(accum[0]))

    def best_many(
        self, nodes: NDArray[np.int64], replicas: NDArray[np.int64]
    ) -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.int64]]:
        """:meth:`best` for many sizes at once: (goodput, atomic, accum) arrays."""
        limits = self.limits
        r = np.asarray(replicas, dtype=np.float64)
        lowest = np.maximum(float(limits.min_batch), limits.min_local * r)
        highest = np.maximum(float(limits.max_batch), lowest)
        if self.noise is None or limits.fixed:
            # No statistics yet (or no choice): the smallest batch the size allows.
            batch = lowest[np.newaxis, :]
        else:
            batch = np.geomspace(lowest, highest, CANDIDATE_BATCHES)
        local = batch / r
        if limits.accumulation:
            accum = np.ceil(local / limits.max_local - _EPS) - 1.0
            # One worker above the reference batch accumulates at least once: its gradient
            # statistics need two micro-batches to be estimated (Pollux's agent does this).
            single = (r == 1) & (local > self.reference + _EPS)
            accum = np.where(single, np.maximum(accum, 1.0), accum)
        else:
            accum = np.zeros_like(local)
        atomic = np.ceil(local / (accum + 1.0) - _EPS)
        valid = (atomic >= limits.min_local) & (atomic <= limits.max_local)
        with np.errstate(invalid="ignore", divide="ignore"):
            goodput = np.where(valid, self.goodput(nodes, r, atomic, accum), 0.0)
        pick = np.argmax(goodput, axis=0)
        columns = np.arange(goodput.shape[1])
        return (
            goodput[pick, columns],
            atomic[pick, columns].astype(np.int64),
            accum[pick, columns].astype(np.int64),
        )


def compact_nodes(replicas: int, gpus_per_node: int) -> int:
    """Nodes a gang of ``replicas`` spans when packed onto as few as possible."""
    return max(1, math.ceil(replicas / gpus_per_node))
